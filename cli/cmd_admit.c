/* gpuquota admit: run a pod (wrapped in the AdmissionReview the API server
 * would send) or a given AdmissionReview through the mutating webhook's
 * decision, wh_mutate_review, offline, and print the decision, the warnings,
 * the JSON Patch, the rewritten pod and what the pod costs. This file only
 * reads input and prints: the decision is the webhook's, byte for byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "quota/config.h"
#include "quota/jsonpatch.h"
#include "common/jsonutil.h"
#include "webhook/memstore.h"
#include "webhook/mutation.h"
#include "quota/pod.h"
#include "quota/podcost.h"
#include "quota/quantity.h"
#include "quota/admission.h"
#include "quota/snapshot.h"
#include "quota/tamper.h"
#include "webhook/review.h"
#include "common/yamljson.h"
#include "common/json_member.h"

const char cli_cmd_admit_summary[] =
    "run a pod or AdmissionReview through the mutating webhook offline";

#define INPUT_MAX ((size_t)GQ_YAML_MAX_BYTES)
#define ADMIT_USER "gpuquota-admit"
#define ADMIT_UID "gpuquota-admit"

#define STATE_FILES_MAX 64

typedef struct admit_opts {
    const char *config; /* NULL: embedded default */
    bool json;
    bool patch_only; /* -o patch: the JSON Patch alone */
    const char *file;
    bool review_only;  /* print the AdmissionReview and stop */
    const char *uid;   /* request.uid of a review made for a pod */
    const char *patch; /* JSON Patch file applied to the pod first */
    cli_list state;    /* --state files (quotas, limit ranges, namespaces, pods) */
    const char *state_files[STATE_FILES_MAX];
} admit_opts;

/* The validating decision offline: the verdict and, for an allowed pod,
 * the quotas that would hold its reservation. */
typedef struct admit_verdict {
    gq_verdict verdict;
    size_t n_charged;
    char charged[512]; /* "GPUQuota team-a/q, GPUTenantQuota ml" */
    char reservation_key[GQ_CRD_MAX_STRING];
} admit_verdict;

/* The outcome of evaluating one pod. */
typedef struct admit_result {
    const char *ns, *name; /* borrowed from the pod; may be NULL */
    bool allowed;
    gq_pod pod;      /* the pod under admission, decoded (quota/pod.h) */
    gq_err err;      /* the denial when !allowed */
    bool validated;  /* the validating decision ran */
    admit_verdict v; /* its outcome */
} admit_result;

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuquota admit [--config FILE] [--state FILE]... [-o text|json|patch]\n"
               "                      [--patch FILE] [--review-only [--uid UID]] FILE\n"
               "\n"
               "FILE holds a Pod or an AdmissionReview (YAML or JSON; - for stdin). A Pod is\n"
               "wrapped in the AdmissionReview the API server sends for creating it. The\n"
               "review goes through the mutating webhook's decision, then the validating\n"
               "webhook's against the --state objects; printed are the decision, each\n"
               "GPU-using container, the GPU model and the pod's charge, the quotas\n"
               "charged, the warnings, the JSON Patch and the rewritten pod. -o json prints\n"
               "one object {allowed, status, warnings, patch, pod, cost, quotas,\n"
               "reservation}; -o patch the JSON Patch alone (one line, [] for none).\n"
               "\n"
               "--state FILE  the cluster the pod is admitted into: GPUQuota, GPUTenantQuota,\n"
               "              GPULimitRange, Namespace and Pod objects (or Lists); pods count\n"
               "              toward quota usage; GPULimitRange defaults apply to the rewrite\n"
               "--patch FILE  apply a JSON Patch (RFC 6902) to the pod first, e.g. the one a\n"
               "              webhook returned, to see what a second invocation does\n"
               "--review-only print the AdmissionReview (one line of JSON) and stop\n"
               "--uid UID     request.uid of that review (default " ADMIT_UID ")\n"
               "\n"
               "exit status: 0 allowed, 1 denied (invalid GPU request), 2 bad input or usage\n");
}

/* argv into *o (strings borrowed from argv). -1 to go on, else the exit
 * status. */
static int parse_args(int argc, char **argv, admit_opts *o)
{
    static const char *const outputs[] = {"text", "json", "patch", NULL};
    int out = 0;
    memset(o, 0, sizeof(*o));
    o->state = (cli_list){o->state_files, 0, STATE_FILES_MAX};
    const cli_opt opts[] = {
        {.name = "--config", .kind = CLI_OPT_STRING, .dst = &o->config},
        {.name = "--review-only", .kind = CLI_OPT_FLAG, .dst = &o->review_only},
        {.name = "--uid", .kind = CLI_OPT_NONEMPTY, .dst = &o->uid},
        {.name = "--patch", .kind = CLI_OPT_STRING, .dst = &o->patch},
        {.name = "--state", .kind = CLI_OPT_LIST, .dst = &o->state},
        {.name = "--output",
         .alias = "-o",
         .kind = CLI_OPT_CHOICE,
         .dst = &out,
         .choices = outputs},
    };
    const char **pos = calloc((size_t)argc, sizeof(*pos));
    size_t n_pos = 0;
    if (!pos) {
        fprintf(stderr, "gpuquota admit: out of memory\n");
        return CLI_EXIT_USAGE;
    }
    int rc = cli_parse_or_exit(&(cli_cmd){"admit", opts, sizeof(opts) / sizeof(opts[0]), usage},
                               argc, argv, pos, &n_pos);
    if (rc < 0 && n_pos != 1) {
        fprintf(stderr, "gpuquota admit: %s\n", n_pos ? "one FILE only" : "FILE is required");
        usage(stderr);
        rc = CLI_EXIT_USAGE;
    }
    if (rc < 0) {
        o->file = pos[0];
        o->json = out == 1;
        o->patch_only = out == 2;
    }
    free(pos);
    return rc;
}

/* The pod in doc: the document itself (kind Pod) or request.object of an
 * AdmissionReview. Borrowed. */
static gq_code find_pod(json_object *doc, json_object **pod, gq_err *err)
{
    const char *kind = gq_json_get_string(doc, "kind");
    json_object *req, *obj;
    if (!json_object_is_type(doc, json_type_object))
        return gq_err_set(err, GQ_EINVAL, "expected a Pod or an AdmissionReview object");
    if (kind && !strcmp(kind, "AdmissionReview")) {
        if (!json_object_object_get_ex(doc, "request", &req) ||
            !json_object_object_get_ex(req, "object", &obj) ||
            !json_object_is_type(obj, json_type_object))
            return gq_err_set(err, GQ_EINVAL, "AdmissionReview has no request.object");
        doc = obj;
        kind = gq_json_get_string(doc, "kind");
        if (!kind) { /* some senders omit kind in request.object; trust request.kind */
            json_object *rk;
            kind =
                json_object_object_get_ex(req, "kind", &rk) ? gq_json_get_string(rk, "kind") : NULL;
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
    r->ns = gq_json_get_string(meta, "namespace");
    r->name = gq_json_get_string(meta, "name");
    if (!r->name)
        r->name = gq_json_get_string(meta, "generateName");
    gq_err_clear(&r->err);
    gq_code rc = gq_pod_decode(cfg, pod, &(gq_pod_scope){.admission = true}, &r->pod, &r->err);
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

/* Every document of the --state files into snap (pods count toward usage). */
static gq_code load_state(const gq_config *cfg, const admit_opts *o, gq_snapshot *snap, gq_err *err)
{
    json_object **docs[STATE_FILES_MAX] = {NULL}, **flat = NULL;
    size_t n_docs[STATE_FILES_MAX] = {0}, n_flat = 0;
    gq_code rc = GQ_OK;
    for (size_t i = 0; i < o->state.n && !rc; i++) {
        char *buf = NULL;
        size_t len = 0;
        rc = cli_read_file(o->state.v[i], INPUT_MAX, &buf, &len, err);
        if (!rc)
            rc = gq_yaml_load(buf, len, o->state.v[i], &docs[i], &n_docs[i], err);
        free(buf);
        n_flat += n_docs[i];
    }
    if (!rc && n_flat && !(flat = calloc(n_flat, sizeof(*flat))))
        rc = gq_err_oom(err);
    if (!rc) {
        size_t k = 0;
        for (size_t i = 0; i < o->state.n; i++)
            for (size_t j = 0; j < n_docs[i]; j++)
                flat[k++] = docs[i][j];
        if ((rc = gq_snapshot_load_state(snap, cfg, flat, n_flat, (int64_t)time(NULL), err)))
            gq_err_prefix(err, "--state");
    }
    free(flat);
    for (size_t i = 0; i < o->state.n; i++)
        gq_yaml_docs_free(docs[i], n_docs[i]);
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
    const gq_pod_cost *c = &r->pod.cost;
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

/* The cost part of -o json: null for a denied pod. */
static json_object *cost_json(const gq_config *cfg, const admit_result *r)
{
    if (!r->allowed)
        return NULL;
    const gq_pod_cost *c = &r->pod.cost;
    json_object *o = json_object_new_object();
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

/* ---- the mutate path ------------------------------------------------------ */

/* doc[member] replaced by a copy of it with the JSON Patch of file applied. */
static gq_code patch_member(json_object *doc, const char *member, const char *file, gq_err *err)
{
    char *text = NULL;
    size_t len = 0;
    json_object *cur = NULL, *patched = NULL;
    gq_code rc = cli_read_file(file, INPUT_MAX, &text, &len, err);
    if (rc)
        return rc;
    json_object_object_get_ex(doc, member, &cur);
    if (!(rc = gq_patch_apply_text(cur, text, len, &patched, err)) &&
        json_object_object_add(doc, member, patched))
        rc = gq_err_oom(err);
    if (rc)
        gq_err_prefix(err, "%s", file);
    free(text);
    return rc;
}

/* The AdmissionReview for doc (the file's object): doc itself, or the pod
 * CREATE the API server would send for it, its author (ADMIT_USER) recorded
 * in managedFields as kube-apiserver records it (*recorded set). With
 * --patch the pod is patched afterwards, as a webhook's patch is applied
 * after the author's fields were recorded. Caller owns *out. GQ_EINVAL for
 * an object that is neither a Pod nor an AdmissionReview. */
static gq_code review_of(const admit_opts *o, json_object *doc, json_object **out, bool *recorded,
                         gq_err *err)
{
    json_object *pod = NULL, *req = NULL, *copy = NULL, *review = NULL;
    gq_code rc;
    const char *kind = gq_json_get_string(doc, "kind");
    *recorded = false;
    if (kind && !strcmp(kind, "AdmissionReview")) {
        review = json_object_get(doc);
    } else {
        if ((rc = find_pod(doc, &pod, err)))
            return rc;
        /* A private copy, so the caller's document stays as read. */
        if (json_object_deep_copy(pod, &copy, NULL))
            return gq_err_oom(err);
        rc = wh_pod_record_author(copy, ADMIT_USER, err);
        if (!rc)
            rc = wh_review_for_pod_create(copy, NULL, o->uid ? o->uid : ADMIT_UID, ADMIT_USER,
                                          &review, err);
        json_object_put(copy);
        if (rc)
            return rc;
        *recorded = true;
    }
    if (o->patch && (!json_object_object_get_ex(review, "request", &req) ||
                     (rc = patch_member(req, "object", o->patch, err)))) {
        json_object_put(review);
        return req ? rc : gq_err_set(err, GQ_EINVAL, "AdmissionReview has no request");
    }
    *out = review;
    return GQ_OK;
}

/* Drop metadata.managedFields from pod (printing: review_of recorded them
 * only for the decision, as `kubectl get` leaves them out). */
static void drop_managed_fields(json_object *pod)
{
    json_object *meta = NULL;
    if (json_object_object_get_ex(pod, "metadata", &meta) &&
        json_object_is_type(meta, json_type_object))
        json_object_object_del(meta, "managedFields");
}

/* What the mutating webhook answered, and the pod it makes. */
typedef struct mutation {
    wh_review_response resp;
    bool have_resp;
    wh_mutate_info info;
    json_object *patch; /* decoded response patch; an empty array for none */
    json_object *pod;   /* the rewritten pod (the object unchanged without a patch); NULL
                           when denied or there is no object */
} mutation;

static void mutation_dispose(mutation *m)
{
    if (m->have_resp)
        wh_review_response_dispose(&m->resp);
    wh_mutate_info_dispose(&m->info);
    json_object_put(m->patch);
    json_object_put(m->pod);
    memset(m, 0, sizeof(*m));
}

/* Run the webhook's decision on req, with the GPULimitRanges and quotas of
 * st (the --state objects), and apply its patch to the object, exactly as the API
 * server would. */
static gq_code mutate(const gq_config *cfg, const wh_review_request *req, const wh_store *st,
                      mutation *m, gq_err *err)
{
    gq_code rc;
    memset(m, 0, sizeof(*m));
    rc = wh_mutate_review_store(cfg, req, st, &m->resp, &m->info, err);
    if (rc)
        return rc;
    m->have_resp = true;
    return wh_mutate_result(req, &m->resp, &m->patch, &m->pod, err);
}

/* The validating decision on the pod the mutation made, as the API server
 * would store it, against the --state snapshot: the core's, on this
 * thread (quota/admission.h, quota/tamper.h), as /validate decides a dry
 * run on a cluster in that state. Leaves r->allowed false with the message
 * in r->err on denial. */
static void charged_add(void *ud, const gq_quota *q)
{
    admit_verdict *v = ud;
    size_t len = strlen(v->charged);
    snprintf(v->charged + len, sizeof(v->charged) - len, "%s%s %s%s%s", len ? ", " : "",
             gq_quota_kind_name(q->kind), q->namespace_ ? q->namespace_ : "",
             q->namespace_ ? "/" : "", q->name);
    v->n_charged++;
}

static const char *review_namespace(const wh_review_request *req, json_object *pod)
{
    const char *ns = gq_json_get_string(gq_json_member(pod, "metadata"), "namespace");
    return req->namespace[0] ? req->namespace : ns ? ns : "";
}

/* A pod CREATE: the admission decision and the quotas it would charge. */
static gq_code validate_create(const gq_config *cfg, const gq_snapshot *snap,
                               const wh_review_request *req, json_object *pod, admit_verdict *v,
                               gq_err *err)
{
    gq_admission a;
    gq_admission_init(&a, &(gq_admission_in){.pod = pod,
                                             .ns = review_namespace(req, pod),
                                             .request_uid = req->uid,
                                             .now = (int64_t)time(NULL),
                                             .ttl = GQ_RESERVATION_TTL_DEFAULT});
    gq_code rc = gq_snapshot_decide(cfg, snap, &a, charged_add, v, err);
    if (!rc) {
        v->verdict = a.verdict;
        if (a.must_charge)
            snprintf(v->reservation_key, sizeof(v->reservation_key), "%s", a.resv.key);
        if (!a.verdict.allowed) {
            v->n_charged = 0;
            v->charged[0] = '\0';
        }
    }
    gq_admission_dispose(&a);
    return rc;
}

static bool trusted(const char *username)
{
    return !strcmp(username, GQ_TRUSTED_WEBHOOK) || !strcmp(username, GQ_TRUSTED_CONTROLLER);
}

static gq_code validate(const gq_config *cfg, const gq_snapshot *snap, const wh_review_request *req,
                        const mutation *m, admit_result *r, gq_err *err)
{
    json_object *obj = m->pod ? m->pod : req->object;
    admit_verdict *v = &r->v;
    gq_code rc = GQ_OK;
    memset(v, 0, sizeof(*v));
    v->verdict.allowed = true;
    switch (wh_review_target_of(req)) {
    case WH_TARGET_POD_CREATE:
        if (!obj)
            gq_verdict_deny(&v->verdict, GQ_EDENIED, "request.object is missing");
        else
            rc = validate_create(cfg, snap, req, obj, v, err);
        break;
    case WH_TARGET_POD_UPDATE:
        if (!trusted(req->username))
            gq_tamper_pod_update(req->old_object, obj, &v->verdict);
        break;
    case WH_TARGET_CLAIM_WRITE:
        if (!trusted(req->username) && obj)
            gq_tamper_claim_write(req->old_object, obj, &v->verdict);
        break;
    case WH_TARGET_OTHER:
        break;
    }
    if (rc)
        return rc;
    r->validated = true;
    if (!v->verdict.allowed) {
        r->allowed = false;
        gq_err_set(&r->err, GQ_EDENIED, "%s", v->verdict.message);
    }
    return GQ_OK;
}

static const char *json_text(json_object *v, int flags)
{
    const char *t = json_object_to_json_string_ext(v, flags | JSON_C_TO_STRING_NOSLASHESCAPE);
    return t ? t : "null";
}

/* Decision line of a review the webhook does not rewrite (print_text
 * prints the pods it does). */
static void print_review_text(const wh_review_request *req, const admit_result *r)
{
    printf("%s %s%s%s (%s): %s\n", req->kind, req->namespace, req->namespace[0] ? "/" : "",
           req->name[0] ? req->name : "(unnamed)", wh_operation_name(req->operation),
           r->allowed ? "allowed" : "denied");
    if (!r->allowed)
        printf("reason: %s\n", r->err.msg);
}

static void print_mutation_text(const admit_result *res, const mutation *m)
{
    const wh_review_response *r = &m->resp;
    for (size_t i = 0; i < r->n_warnings; i++)
        printf("warning: %s\n", r->warnings[i]);
    if (!res->allowed)
        return;
    size_t n = json_object_array_length(m->patch);
    if (!n) {
        printf("patch: none (admitted unchanged)\n");
        return;
    }
    printf("patch: %zu operation%s\n", n, n == 1 ? "" : "s");
    for (size_t i = 0; i < n; i++) {
        json_object *op = json_object_array_get_idx(m->patch, i), *v = NULL;
        const char *opname = gq_json_get_string(op, "op"), *path = gq_json_get_string(op, "path");
        bool has_value = json_object_object_get_ex(op, "value", &v);
        printf("  %s %s%s%s\n", opname ? opname : "?", path ? path : "?", has_value ? " " : "",
               has_value ? json_text(v, JSON_C_TO_STRING_PLAIN) : "");
    }
    printf("rewritten pod:\n%s\n",
           json_text(m->pod, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED));
}

/* -o json: {allowed, status, warnings, patch, pod, cost, quotas,
 * reservation}; status is the denying webhook's (403 Forbidden for a quota). */
static void print_mutation_json(const gq_config *cfg, const admit_result *r, bool is_pod,
                                const mutation *m)
{
    const wh_review_response *rs = &m->resp;
    json_object *o = json_object_new_object(), *status = NULL, *warnings = json_object_new_array();
    json_object_object_add(o, "allowed", json_object_new_boolean(r->allowed));
    if (!r->allowed) {
        bool mutating = !rs->allowed;
        status = json_object_new_object();
        json_object_object_add(status, "code", json_object_new_int(mutating ? rs->code : 403));
        json_object_object_add(status, "reason",
                               json_object_new_string(mutating ? rs->reason : "Forbidden"));
        json_object_object_add(status, "message", json_object_new_string(r->err.msg));
    }
    json_object_object_add(o, "status", status);
    for (size_t i = 0; i < rs->n_warnings; i++)
        json_object_array_add(warnings, json_object_new_string(rs->warnings[i]));
    json_object_object_add(o, "warnings", warnings);
    json_object_object_add(o, "patch",
                           r->allowed ? json_object_get(m->patch) : json_object_new_array());
    json_object_object_add(o, "pod", r->allowed ? json_object_get(m->pod) : NULL);
    json_object_object_add(o, "cost", is_pod ? cost_json(cfg, r) : NULL);
    add_quotas_json(o, r);
    puts(json_text(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED));
    json_object_put(o);
}

/* One run of the command: what it read, decided and must free. */
typedef struct admit_run {
    const admit_opts *o;
    const char *name; /* the input's name in messages */
    gq_config *cfg;
    char *buf;
    size_t len, n_docs;
    json_object **docs, *review;
    bool recorded; /* the input was a recorded review */
    wh_review_request req;
    bool have_req;
    gq_snapshot *snap; /* the cluster of --state */
    wh_memstore *ms;   /* snap behind the store seam, for the mutation */
    wh_store st;
    bool is_pod; /* the webhook rewrites it: its cost is explained */
    admit_result r;
    mutation m;
    gq_err err;
} admit_run;

static void admit_run_init(admit_run *run, const admit_opts *o)
{
    memset(run, 0, sizeof(*run));
    run->o = o;
    run->name = strcmp(o->file, "-") ? o->file : "<stdin>";
    gq_pod_init(&run->r.pod);
    gq_err_clear(&run->err);
}

static void admit_run_dispose(admit_run *run)
{
    mutation_dispose(&run->m);
    wh_memstore_free(run->ms);
    gq_snapshot_free(run->snap);
    if (run->have_req)
        wh_review_request_dispose(&run->req);
    json_object_put(run->review);
    gq_pod_dispose(&run->r.pod);
    gq_yaml_docs_free(run->docs, run->n_docs);
    free(run->buf);
    gq_config_free(run->cfg);
}

/* The configuration, and the one object of the input as an AdmissionReview. */
static gq_code read_review(admit_run *run)
{
    gq_code rc;
    if ((rc = cli_load_config(run->o->config, &run->cfg, &run->err)) ||
        (rc = cli_read_file(run->o->file, INPUT_MAX, &run->buf, &run->len, &run->err)) ||
        (rc = gq_yaml_load(run->buf, run->len, run->name, &run->docs, &run->n_docs, &run->err)))
        return rc;
    if (run->n_docs != 1)
        return gq_err_set(&run->err, GQ_EINVAL, "%s: expected one object, found %zu documents",
                          run->name, run->n_docs);
    if ((rc = review_of(run->o, run->docs[0], &run->review, &run->recorded, &run->err)))
        gq_err_prefix(&run->err, "%s", run->name);
    return rc;
}

/* The review through the webhook's own decoder (an AdmissionReview it would
 * refuse, 400, is bad input here), and the cluster of --state (none: an
 * empty one) for both decisions. */
static gq_code load_cluster(admit_run *run)
{
    gq_code rc = wh_review_decode_json(run->review, &run->req, &run->err);
    run->review = NULL;
    if (rc) {
        gq_err_prefix(&run->err, "%s", run->name);
        return rc;
    }
    run->have_req = true;
    if ((rc = gq_snapshot_new(&run->snap, &run->err)) ||
        (rc = load_state(run->cfg, run->o, run->snap, &run->err)) ||
        (rc = wh_memstore_over(run->snap, &run->ms, &run->err)))
        return rc;
    wh_memstore_store(run->ms, &run->st);
    return GQ_OK;
}

/* Both webhooks' decisions on the review, and the cost that explains them. */
static gq_code decide(admit_run *run)
{
    gq_code rc;
    admit_result *r = &run->r;
    /* Pods the webhook rewrites get their cost explained; anything else
     * (other kinds, operations, exempt namespaces) only the decision. */
    run->is_pod = wh_mutate_applies(run->cfg, &run->req);
    if (run->is_pod && (rc = evaluate(run->cfg, run->req.object, r))) {
        run->err = r->err;
        return rc;
    }
    if ((rc = mutate(run->cfg, &run->req, &run->st, &run->m, &run->err)))
        return rc;
    /* The decision is the webhooks'; the cost explains it. A choice of
     * models or DRA claims are known only after the mutation: then it is
     * priced on the rewritten pod. */
    if (run->is_pod && run->m.resp.allowed && run->m.pod &&
        (!r->allowed || r->pod.cost.claims_unpriced)) {
        gq_err e2;
        /* r->pod is replaced only when the rewritten pod prices. */
        bool repriced = gq_pod_decode(run->cfg, run->m.pod, &(gq_pod_scope){.admission = true},
                                      &r->pod, &e2) == GQ_OK;
        (void)repriced;
    }
    r->allowed = run->m.resp.allowed;
    if (!r->allowed)
        gq_err_set(&r->err, GQ_EDENIED, "%s", run->m.resp.message ? run->m.resp.message : "");
    if (r->allowed && (rc = validate(run->cfg, run->snap, &run->req, &run->m, r, &run->err)))
        return rc;
    if (run->recorded)
        drop_managed_fields(run->m.pod);
    return GQ_OK;
}

static void print_decision(const admit_run *run)
{
    if (run->o->patch_only) {
        puts(json_text(run->m.patch, JSON_C_TO_STRING_PLAIN));
    } else if (run->o->json) {
        print_mutation_json(run->cfg, &run->r, run->is_pod, &run->m);
    } else {
        if (run->is_pod)
            print_text(run->cfg, &run->r);
        else
            print_review_text(&run->req, &run->r);
        print_mutation_text(&run->r, &run->m);
    }
}

int cli_cmd_admit(int argc, char **argv)
{
    admit_opts o;
    admit_run run;
    int status = CLI_EXIT_USAGE;
    int a = parse_args(argc, argv, &o);
    if (a >= 0)
        return a;
    admit_run_init(&run, &o);
    if (read_review(&run))
        goto fail;
    if (o.review_only) {
        puts(json_text(run.review, JSON_C_TO_STRING_PLAIN));
        status = CLI_EXIT_OK;
        goto out;
    }
    if (load_cluster(&run) || decide(&run))
        goto fail;
    print_decision(&run);
    status = run.r.allowed ? CLI_EXIT_OK : CLI_EXIT_DENIED;
    goto out;
fail:
    fprintf(stderr, "gpuquota admit: %s\n", run.err.msg);
out:
    admit_run_dispose(&run);
    return status;
}
