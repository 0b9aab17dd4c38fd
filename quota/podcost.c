/* What a pod costs in GPU terms (see podcost.h and docs/pod-cost.md).
 *
 * The computation runs in three steps: resolve the pod's GPU model, read
 * each container's GPU request (whatever form it is written in) into a
 * gq_ctr_cost, then combine the containers with the Kubernetes effective
 * request rule. Every value read from the pod is untrusted: wrong JSON types
 * are errors naming the field, never crashes, and all arithmetic is checked. */
#include "quota/podcost.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/jsonutil.h"
#include "quota/quantity.h"

#define MIB ((int64_t)1 << 20)
#define NANO 1000000000LL
/* No node has more GPUs than this; a bigger count is a typo or an attack. */
#define MAX_GPUS_PER_CTR 1024
#define TEXT_MAX 64

const char *gq_form_name(gq_form f)
{
    switch (f) {
    case GQ_FORM_NONE:
        return "none";
    case GQ_FORM_MEMORY:
        return "memory";
    case GQ_FORM_FRACTION:
        return "fraction";
    case GQ_FORM_ANN_FRACTION:
        return "annotation-fraction";
    case GQ_FORM_ANN_MEMORY:
        return "annotation-memory";
    case GQ_FORM_HAMI_MEMORY:
        return "hami-memory";
    case GQ_FORM_HAMI_PERCENT:
        return "hami-percentage";
    case GQ_FORM_KAI_FRACTION:
        return "kai-fraction";
    case GQ_FORM_KAI_MEMORY:
        return "kai-memory";
    case GQ_FORM_WHOLE:
        return "whole";
    case GQ_FORM_BACKEND:
        return "backend";
    }
    return "unknown";
}

void gq_pod_cost_init(gq_pod_cost *c)
{
    if (c)
        memset(c, 0, sizeof(*c));
}

void gq_pod_cost_dispose(gq_pod_cost *c)
{
    if (!c)
        return;
    free(c->ctrs);
    free(c->shared);
    memset(c, 0, sizeof(*c));
}

/* ---- checked arithmetic ------------------------------------------------ */

static gq_code add_i64(int64_t a, int64_t b, int64_t *out)
{
    if (__builtin_add_overflow(a, b, out))
        return GQ_ERANGE;
    return GQ_OK;
}

/* ceil(v * num / den) for 0 <= v, 0 <= num <= den <= 1e9, without overflow:
 * v = a*den + b, so v*num/den = a*num + b*num/den and b*num < 1e18. */
static int64_t mul_frac_ceil(int64_t v, int64_t num, int64_t den)
{
    int64_t a = v / den, b = v % den;
    int64_t r = b * num;
    return a * num + r / den + (r % den != 0);
}

/* ceil(v / unit) * unit; GQ_ERANGE when it does not fit. */
static gq_code round_up(int64_t v, int64_t unit, int64_t *out)
{
    int64_t n = v / unit + (v % unit != 0);
    if (__builtin_mul_overflow(n, unit, out))
        return GQ_ERANGE;
    return GQ_OK;
}

/* ---- JSON access -------------------------------------------------------- */

/* Optional member of the given type: absent or JSON null -> *out = NULL.
 * Any other type is an error naming the field. */
static gq_code get_typed(json_object *parent, const char *key, json_type type, const char *what,
                         const char *field, json_object **out, gq_err *err)
{
    json_object *v = NULL;
    *out = NULL;
    if (!parent || !json_object_object_get_ex(parent, key, &v) || !v)
        return GQ_OK;
    if (!json_object_is_type(v, type))
        return gq_err_set(err, GQ_EINVAL, "%s must be %s", field, what);
    *out = v;
    return GQ_OK;
}

static gq_code get_object(json_object *parent, const char *key, const char *field,
                          json_object **out, gq_err *err)
{
    return get_typed(parent, key, json_type_object, "an object", field, out, err);
}

static gq_code get_array(json_object *parent, const char *key, const char *field, json_object **out,
                         gq_err *err)
{
    return get_typed(parent, key, json_type_array, "an array", field, out, err);
}

static gq_code get_string(json_object *parent, const char *key, const char *field, const char **out,
                          gq_err *err)
{
    json_object *v = NULL;
    gq_code rc = get_typed(parent, key, json_type_string, "a string", field, &v, err);
    *out = v ? json_object_get_string(v) : NULL;
    return rc;
}

/* ---- values ------------------------------------------------------------- */

/* One request value as read from the pod: the parsed quantity and the text
 * as written (bounded, for messages and the `original` record). */
typedef struct qval {
    bool present;
    gq_quantity q;
    char text[TEXT_MAX];
} qval;

/* Where a value came from, for messages: `container "x": nvidia.com/gpu` or
 * `pod annotation gpu-fraction`. */
typedef struct origin {
    const char *ctr; /* NULL for pod-level values */
    const char *field;
} origin;

static gq_code fail(gq_err *err, gq_code code, const origin *o, const char *fmt, ...)
    GQ_PRINTF(4, 5);

static gq_code fail(gq_err *err, gq_code code, const origin *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gq_err_vset(err, code, fmt, ap);
    va_end(ap);
    if (o && o->ctr)
        gq_err_prefix(err, "container \"%s\"", o->ctr);
    return code;
}

/* Copy at most TEXT_MAX-1 bytes of s, marking truncation. */
static void copy_text(char dst[TEXT_MAX], const char *s, size_t len)
{
    if (len >= TEXT_MAX) {
        memcpy(dst, s, TEXT_MAX - 4);
        memcpy(dst + TEXT_MAX - 4, "...", 4);
        return;
    }
    memcpy(dst, s, len);
    dst[len] = '\0';
}

/* A quantity may be written as a JSON string or a JSON number (YAML
 * `nvidia.com/gpu: 1`), exactly as resource.Quantity unmarshals both. */
static gq_code read_quantity(json_object *v, const origin *o, qval *out, gq_err *err)
{
    const char *s;
    size_t len;
    if (json_object_is_type(v, json_type_string)) {
        s = json_object_get_string(v);
        len = (size_t)json_object_get_string_len(v);
    } else if (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)) {
        s = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
        len = s ? strlen(s) : 0;
    } else {
        return fail(err, GQ_EINVAL, o,
                    "%s must be a quantity (a string such as \"10Gi\" or a number)", o->field);
    }
    if (!s)
        return fail(err, GQ_ENOMEM, o, "%s: out of memory", o->field);
    qval r = {.present = true};
    copy_text(r.text, s, len);
    gq_err qerr;
    gq_err_clear(&qerr);
    gq_code rc = gq_quantity_parse(s, len, &r.q, &qerr);
    if (rc == GQ_ERANGE)
        return fail(err, GQ_ERANGE, o, "%s: %s", o->field, qerr.msg);
    if (rc)
        return fail(err, GQ_EINVAL, o, "%s \"%s\" is not a valid quantity: %s", o->field, r.text,
                    qerr.msg);
    *out = r;
    return GQ_OK;
}

/* A resource from limits, or from requests when only there; both present and
 * different is an error (extended resources require requests == limits). */
static gq_code read_resource(json_object *limits, json_object *requests, const char *ctr,
                             const char *key, qval *out, gq_err *err)
{
    json_object *lv = NULL, *rv = NULL;
    qval l = {0}, r = {0};
    origin o = {ctr, key};
    gq_code rc;
    if (limits && json_object_object_get_ex(limits, key, &lv) && lv) {
        rc = read_quantity(lv, &o, &l, err);
        if (rc)
            return rc;
    }
    if (requests && json_object_object_get_ex(requests, key, &rv) && rv) {
        rc = read_quantity(rv, &o, &r, err);
        if (rc)
            return rc;
    }
    if (l.present && r.present && gq_quantity_cmp(&l.q, &r.q) != 0)
        return fail(err, GQ_EINVAL, &o,
                    "%s requests \"%s\" and limits \"%s\" differ: Kubernetes requires requests to "
                    "equal limits for extended resources (set only limits)",
                    key, r.text, l.text);
    *out = l.present ? l : r;
    /* Zero of an extended resource asks for none of it, as in Kubernetes
     * (charts default nvidia.com/gpu to 0). */
    if (out->present && gq_quantity_is_zero(&out->q))
        out->present = false;
    return GQ_OK;
}

/* A count of devices: a whole number from 1 to MAX_GPUS_PER_CTR. */
static gq_code read_count(const qval *v, const origin *o, int64_t *out, gq_err *err)
{
    int64_t n = 0;
    if (!gq_quantity_is_integer(&v->q) || gq_quantity_to_int64_ceil(&v->q, &n) != GQ_OK || n < 1 ||
        n > MAX_GPUS_PER_CTR)
        return fail(
            err, GQ_EINVAL, o,
            "%s \"%s\" is not valid: the number of GPUs must be a whole number from 1 to %d",
            o->field, v->text, MAX_GPUS_PER_CTR);
    *out = n;
    return GQ_OK;
}

/* Bytes (mult 1) or MiB (mult MIB) of GPU memory: positive, fits int64. */
static gq_code read_memory(const qval *v, const origin *o, int64_t mult, int64_t *out, gq_err *err)
{
    int64_t n = 0;
    const char *example = mult == 1 ? "\"10Gi\"" : "10240 (MiB)";
    if (gq_quantity_is_negative(&v->q) || gq_quantity_is_zero(&v->q))
        return fail(err, GQ_EINVAL, o,
                    "%s \"%s\" is not valid: GPU memory must be positive (for example %s)",
                    o->field, v->text, example);
    if (gq_quantity_to_int64_ceil(&v->q, &n) != GQ_OK || __builtin_mul_overflow(n, mult, &n))
        return fail(err, GQ_ERANGE, o, "%s \"%s\" is too large", o->field, v->text);
    *out = n;
    return GQ_OK;
}

/* A fraction of one GPU in (0, 1], returned in billionths (rounded up). */
static gq_code read_fraction(const qval *v, const origin *o, int64_t *nanos, gq_err *err)
{
    gq_quantity one = gq_quantity_from_int64(1, GQ_QFMT_DECIMAL_SI), scaled;
    int64_t n = 0;
    if (gq_quantity_is_negative(&v->q) || gq_quantity_is_zero(&v->q) ||
        gq_quantity_cmp(&v->q, &one) > 0 || gq_quantity_scale_ceil(&v->q, NANO, 1, &scaled) ||
        gq_quantity_to_int64_ceil(&scaled, &n) || n < 1 || n > NANO)
        return fail(err, GQ_EINVAL, o,
                    "%s \"%s\" is not valid: a GPU fraction must be in (0, 1] (for example \"0.5\" "
                    "or \"500m\"); ask for whole GPUs as an integer",
                    o->field, v->text);
    *nanos = n;
    return GQ_OK;
}

/* Record the request as written; long values are cut, never overflow. */
static void set_original(gq_ctr_cost *c, const char *fmt, ...) GQ_PRINTF(2, 3);

static void set_original(gq_ctr_cost *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(c->original, sizeof(c->original), fmt, ap) < 0)
        c->original[0] = '\0';
    va_end(ap);
}

/* ---- model resolution -------------------------------------------------- */

static const gq_model *model_by_product(const gq_config *cfg, const char *product)
{
    for (size_t i = 0; i < cfg->n_models; i++)
        for (size_t j = 0; j < cfg->models[i].n_products; j++)
            if (!strcmp(cfg->models[i].products[j], product))
                return &cfg->models[i];
    return NULL;
}

/* The one model all values of a required node affinity `In` on
 * nvidia.com/gpu.product belong to (the webhook's own pin), else NULL.
 * Shapes this does not recognise simply do not pin: affinity is the
 * scheduler's business, not a GPU request. */
static const gq_model *model_from_affinity(const gq_config *cfg, json_object *spec)
{
    json_object *a, *na, *req, *terms, *term, *exprs;
    if (!json_object_object_get_ex(spec, "affinity", &a) ||
        !json_object_object_get_ex(a, "nodeAffinity", &na) ||
        !json_object_object_get_ex(na, "requiredDuringSchedulingIgnoredDuringExecution", &req) ||
        !json_object_object_get_ex(req, "nodeSelectorTerms", &terms) ||
        !json_object_is_type(terms, json_type_array) || json_object_array_length(terms) != 1)
        return NULL;
    term = json_object_array_get_idx(terms, 0);
    if (!json_object_object_get_ex(term, "matchExpressions", &exprs) ||
        !json_object_is_type(exprs, json_type_array))
        return NULL;
    size_t n = json_object_array_length(exprs);
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(exprs, i), *k, *op, *vals;
        if (!json_object_object_get_ex(e, "key", &k) ||
            !json_object_object_get_ex(e, "operator", &op) ||
            !json_object_object_get_ex(e, "values", &vals) ||
            !json_object_is_type(k, json_type_string) ||
            !json_object_is_type(op, json_type_string) ||
            !json_object_is_type(vals, json_type_array) ||
            strcmp(json_object_get_string(k), GQ_LABEL_GPU_PRODUCT) ||
            strcmp(json_object_get_string(op), "In"))
            continue;
        size_t nv = json_object_array_length(vals);
        const gq_model *m = NULL;
        for (size_t j = 0; j < nv; j++) {
            json_object *v = json_object_array_get_idx(vals, j);
            if (!json_object_is_type(v, json_type_string))
                return NULL;
            const gq_model *mj = model_by_product(cfg, json_object_get_string(v));
            if (!mj || (m && m != mj))
                return NULL;
            m = mj;
        }
        return m;
    }
    return NULL;
}

static gq_code unknown_model(const gq_config *cfg, const char *name, gq_err *err)
{
    char list[GQ_ERR_MSG_MAX / 2];
    size_t off = 0;
    list[0] = '\0';
    for (size_t i = 0; i < cfg->n_models && off < sizeof(list); i++) {
        int n =
            snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "", cfg->models[i].name);
        if (n < 0)
            break;
        off += (size_t)n;
    }
    return gq_err_set(err, GQ_ENOTFOUND,
                      "pod annotation " GQ_ANN_GPU_MODEL
                      " \"%.63s\" is not a known GPU model; known "
                      "models: %s",
                      name, list);
}

static gq_code resolve_model(const gq_config *cfg, json_object *ann, json_object *spec,
                             const gq_model **model, bool *pinned, gq_err *err)
{
    const char *name = NULL;
    json_object *sel = NULL;
    gq_code rc;
    rc = get_string(ann, GQ_ANN_GPU_MODEL, "metadata.annotations[\"" GQ_ANN_GPU_MODEL "\"]", &name,
                    err);
    if (rc)
        return rc;
    if (name) {
        if (strchr(name, ','))
            return gq_err_set(err, GQ_EINVAL,
                              "pod annotation " GQ_ANN_GPU_MODEL
                              " \"%.200s\" lists several models; gpuquota's mutating webhook "
                              "chooses one when the pod is created",
                              name);
        *model = gq_config_find_model(cfg, name);
        *pinned = true;
        return *model ? GQ_OK : unknown_model(cfg, name, err);
    }
    rc = get_object(spec, "nodeSelector", "spec.nodeSelector", &sel, err);
    if (rc)
        return rc;
    rc = get_string(sel, GQ_LABEL_GPU_PRODUCT, "spec.nodeSelector[\"" GQ_LABEL_GPU_PRODUCT "\"]",
                    &name, err);
    if (rc)
        return rc;
    if (name && (*model = model_by_product(cfg, name))) {
        *pinned = true;
        return GQ_OK;
    }
    if ((*model = model_from_affinity(cfg, spec))) {
        *pinned = true;
        return GQ_OK;
    }
    *model = gq_config_default_model(cfg);
    *pinned = false;
    return GQ_OK;
}

gq_code gq_pod_model_choices(const gq_config *cfg, json_object *pod, const gq_model **out,
                             size_t *n_out, gq_err *err)
{
    json_object *meta = NULL, *ann = NULL;
    const char *list = NULL;
    gq_code rc;
    if ((rc = get_object(pod, "metadata", "metadata", &meta, err)) ||
        (rc = get_object(meta, "annotations", "metadata.annotations", &ann, err)) ||
        (rc = get_string(ann, GQ_ANN_GPU_MODEL, "metadata.annotations[\"" GQ_ANN_GPU_MODEL "\"]",
                         &list, err)))
        return rc;
    if (!list || !strchr(list, ',')) {
        *n_out = 0;
        return GQ_OK;
    }
    const gq_model *got[GQ_MAX_MODEL_CHOICES];
    size_t n = 0;
    for (const char *p = list;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char name[GQ_MODEL_NAME_TEXT_MAX];
        if (!len || len >= sizeof(name))
            return gq_err_set(err, GQ_EINVAL,
                              "pod annotation " GQ_ANN_GPU_MODEL
                              " \"%.200s\": each item must be a GPU model name of 1 to %zu "
                              "characters, separated by ',' in order of preference",
                              list, sizeof(name) - 1);
        if (n == GQ_MAX_MODEL_CHOICES)
            return gq_err_set(err, GQ_EINVAL,
                              "pod annotation " GQ_ANN_GPU_MODEL
                              " \"%.200s\": at most %d models may be listed",
                              list, GQ_MAX_MODEL_CHOICES);
        memcpy(name, p, len);
        name[len] = '\0';
        const gq_model *m = gq_config_find_model(cfg, name);
        if (!m)
            return unknown_model(cfg, name, err);
        for (size_t i = 0; i < n; i++)
            if (got[i] == m)
                return gq_err_set(err, GQ_EINVAL,
                                  "pod annotation " GQ_ANN_GPU_MODEL
                                  " \"%.200s\" names model %s twice",
                                  list, m->name);
        got[n++] = m;
        if (!end)
            break;
        p = end + 1;
    }
    memcpy(out, got, n * sizeof(*got));
    *n_out = n;
    return GQ_OK;
}

/* ---- pod-level request annotations ------------------------------------- */

typedef struct pod_req {
    gq_form form; /* GQ_FORM_NONE when the pod has no request annotation */
    const char *key;
    qval v;
    json_object *target; /* the container it applies to */
} pod_req;

static const struct {
    const char *key;
    gq_form form;
} pod_req_keys[] = {
    {GQ_ANN_GPU_FRACTION, GQ_FORM_ANN_FRACTION},
    {GQ_ANN_GPU_MEMORY, GQ_FORM_ANN_MEMORY},
    {GQ_ANN_KAI_FRACTION, GQ_FORM_KAI_FRACTION},
    {GQ_ANN_KAI_MEMORY, GQ_FORM_KAI_MEMORY},
};

static gq_code find_named(json_object *arr, const char *name, json_object **out)
{
    size_t n = arr ? json_object_array_length(arr) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *c = json_object_array_get_idx(arr, i), *nm;
        if (json_object_object_get_ex(c, "name", &nm) &&
            json_object_is_type(nm, json_type_string) &&
            !strcmp(json_object_get_string(nm), name)) {
            *out = c;
            return GQ_OK;
        }
    }
    return GQ_ENOTFOUND;
}

static gq_code read_pod_req(json_object *ann, json_object *ctrs, json_object *inits, pod_req *out,
                            gq_err *err)
{
    pod_req r = {.form = GQ_FORM_NONE};
    gq_code rc;
    for (size_t i = 0; i < sizeof(pod_req_keys) / sizeof(pod_req_keys[0]); i++) {
        char field[96];
        const char *s = NULL;
        snprintf(field, sizeof(field), "metadata.annotations[\"%s\"]", pod_req_keys[i].key);
        rc = get_string(ann, pod_req_keys[i].key, field, &s, err);
        if (rc)
            return rc;
        if (!s)
            continue;
        qval v;
        snprintf(field, sizeof(field), "pod annotation %s", pod_req_keys[i].key);
        origin o = {NULL, field};
        rc = read_quantity(json_object_object_get(ann, pod_req_keys[i].key), &o, &v, err);
        if (rc)
            return rc;
        if (gq_quantity_is_zero(&v.q))
            continue; /* asks for no GPU, like a zero resource */
        if (r.form != GQ_FORM_NONE)
            return gq_err_set(err, GQ_EINVAL,
                              "pod annotations %s and %s both ask for a GPU; use only one", r.key,
                              pod_req_keys[i].key);
        r.form = pod_req_keys[i].form;
        r.key = pod_req_keys[i].key;
        r.v = v;
    }
    if (r.form == GQ_FORM_NONE) {
        *out = r;
        return GQ_OK;
    }
    const char *cname = NULL;
    rc = get_string(ann, GQ_ANN_GPU_CONTAINER, "metadata.annotations[\"" GQ_ANN_GPU_CONTAINER "\"]",
                    &cname, err);
    if (rc)
        return rc;
    if (cname) {
        if (find_named(ctrs, cname, &r.target) && find_named(inits, cname, &r.target))
            return gq_err_set(err, GQ_EINVAL,
                              "pod annotation " GQ_ANN_GPU_CONTAINER " names container \"%.63s\", "
                              "which the pod does not have",
                              cname);
    } else if (ctrs && json_object_array_length(ctrs) > 0) {
        r.target = json_object_array_get_idx(ctrs, 0);
    } else {
        return gq_err_set(err, GQ_EINVAL,
                          "pod annotation %s asks for a GPU but the pod has no containers", r.key);
    }
    *out = r;
    return GQ_OK;
}

/* Memory per GPU the webhook recorded for container name in the
 * gpuquota.io/gpu-requests annotation; 0 when absent or malformed. */
static int64_t recorded_memory(json_object *ann, const char *name)
{
    json_object *a, *doc, *c, *m;
    int64_t bytes = 0;
    if (!ann || !json_object_object_get_ex(ann, GQ_ANN_REQUESTS, &a) ||
        !json_object_is_type(a, json_type_string))
        return 0;
    json_tokener *tok = json_tokener_new_ex(4);
    if (!tok)
        return 0;
    doc = json_tokener_parse_ex(tok, json_object_get_string(a), json_object_get_string_len(a) + 1);
    json_tokener_free(tok);
    gq_quantity q;
    bool ok = json_object_object_get_ex(doc, name, &c) &&
              json_object_object_get_ex(c, "memory", &m) &&
              json_object_is_type(m, json_type_string) &&
              gq_quantity_parse(json_object_get_string(m), (size_t)json_object_get_string_len(m),
                                &q, NULL) == GQ_OK &&
              !gq_quantity_is_negative(&q) && gq_quantity_to_int64_ceil(&q, &bytes) == GQ_OK;
    json_object_put(doc);
    if (!ok)
        return 0;
    return bytes > 0 ? bytes : 0;
}

/* ---- one container ------------------------------------------------------ */

typedef struct pc_ctx {
    const gq_config *cfg;
    const gq_model *model;
    const gq_model *unknown; /* what a whole GPU of unknown model is charged as */
    json_object *recorded;   /* annotations holding gpu-requests gpuquota wrote; else NULL */
    const pod_req *preq;
    bool managed; /* gq_pod_managed: gpuquota already rewrote it */
    gq_pod_trust trust;
} pc_ctx;

/* The request values of one container. */
typedef struct ctr_in {
    qval gpu, mem, hami_mem, hami_pct, aliyun, volc_n, volc_mem, shared, mig;
    char mig_key[TEXT_MAX]; /* "nvidia.com/mig-1g.10gb" */
} ctr_in;

/* The one nvidia.com/mig-* key of a resource list, if any. */
static gq_code find_mig_key(json_object *list, const char *ctr, char key[TEXT_MAX], gq_err *err)
{
    if (!list)
        return GQ_OK;
    json_object_object_foreach(list, k, v)
    {
        (void)v;
        if (strncmp(k, GQ_RES_MIG_PREFIX, strlen(GQ_RES_MIG_PREFIX)))
            continue;
        if (strlen(k) >= TEXT_MAX)
            return gq_err_set(err, GQ_EINVAL, "container \"%s\": unknown MIG resource \"%.63s...\"",
                              ctr, k);
        if (key[0] && strcmp(key, k))
            return gq_err_set(err, GQ_EINVAL,
                              "container \"%s\": %s and %s: ask for one MIG profile per container",
                              ctr, key, k);
        snprintf(key, TEXT_MAX, "%s", k);
    }
    return GQ_OK;
}

static gq_code read_ctr_in(json_object *res, const char *ctr, const char *path, ctr_in *in,
                           gq_err *err)
{
    json_object *limits = NULL, *requests = NULL;
    char field[96];
    gq_code rc;
    memset(in, 0, sizeof(*in));
    snprintf(field, sizeof(field), "%s.resources.limits", path);
    rc = get_object(res, "limits", field, &limits, err);
    if (rc)
        return rc;
    snprintf(field, sizeof(field), "%s.resources.requests", path);
    rc = get_object(res, "requests", field, &requests, err);
    if (rc)
        return rc;
    const struct {
        const char *key;
        qval *v;
    } keys[] = {
        {GQ_RES_NVIDIA_GPU, &in->gpu},          {GQ_RES_GPU_MEMORY, &in->mem},
        {GQ_RES_HAMI_MEMORY, &in->hami_mem},    {GQ_RES_HAMI_PERCENT, &in->hami_pct},
        {GQ_RES_ALIYUN_MEM, &in->aliyun},       {GQ_RES_VOLCANO_NUMBER, &in->volc_n},
        {GQ_RES_VOLCANO_MEMORY, &in->volc_mem}, {GQ_RES_SHARED_GPU, &in->shared},
    };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        rc = read_resource(limits, requests, ctr, keys[i].key, keys[i].v, err);
        if (rc)
            return rc;
    }
    rc = find_mig_key(limits, ctr, in->mig_key, err);
    if (!rc)
        rc = find_mig_key(requests, ctr, in->mig_key, err);
    if (!rc && in->mig_key[0])
        rc = read_resource(limits, requests, ctr, in->mig_key, &in->mig, err);
    return rc;
}

/* Smallest MIG profile of m holding bytes. */
static const gq_mig_profile *mig_fit(const gq_model *m, int64_t bytes)
{
    for (size_t i = 0; m && i < m->n_mig; i++)
        if (m->mig[i].memory >= bytes)
            return &m->mig[i];
    return NULL;
}

static const gq_mig_profile *mig_by_name(const gq_config *cfg, const gq_model *m, const char *name)
{
    for (size_t i = 0; i < cfg->n_models; i++) {
        const gq_model *mi = m ? m : &cfg->models[i];
        for (size_t j = 0; j < mi->n_mig; j++)
            if (!strcmp(mi->mig[j].name, name))
                return &mi->mig[j];
        if (m)
            break;
    }
    return NULL;
}

static gq_code need_model(const pc_ctx *x, const origin *o, const qval *v, gq_err *err)
{
    if (x->model)
        return GQ_OK;
    return fail(err, GQ_EINVAL, o,
                "%s \"%s\" needs a GPU model to turn into memory: pin one with pod "
                "annotation " GQ_ANN_GPU_MODEL " or set defaultModel in the configuration",
                o->field, v->text);
}

/* Shared slice requested from a form the webhook rewrites: check it fits the
 * card and charge what the configured backend's device plugin reserves. */
static gq_code charge_slice(const pc_ctx *x, const origin *o, const char *text, gq_ctr_cost *c,
                            gq_err *err)
{
    char have[GQ_QUANTITY_STR_MAX];
    if (x->model && c->memory_per_gpu > x->model->memory) {
        gq_format_bytes(x->model->memory, have);
        return fail(err, GQ_EINVAL, o, "%s \"%s\" is more memory than one %s GPU has (%s)",
                    o->field, text, x->model->name, have);
    }
    switch (x->cfg->backend) {
    case GQ_BACKEND_ALIYUN:
        if (c->gpus > 1)
            return fail(
                err, GQ_EUNSUPPORTED, o,
                "%s: the aliyun backend cannot split a container over several GPUs; ask for "
                "one slice or use whole GPUs",
                o->field);
        /* fall through */
    case GQ_BACKEND_TIMESLICING:
        if (round_up(c->memory_per_gpu, x->cfg->memory_unit, &c->charged_per_gpu))
            return fail(err, GQ_ERANGE, o, "%s \"%s\" is too large", o->field, text);
        return GQ_OK;
    case GQ_BACKEND_HAMI:
    case GQ_BACKEND_VOLCANO:
        if (round_up(c->memory_per_gpu, MIB, &c->charged_per_gpu))
            return fail(err, GQ_ERANGE, o, "%s \"%s\" is too large", o->field, text);
        return GQ_OK;
    case GQ_BACKEND_MIG: {
        const gq_mig_profile *p = mig_fit(x->model, c->memory_per_gpu);
        if (!x->model || x->model->n_mig == 0)
            return fail(err, GQ_EINVAL, o,
                        "%s \"%s\": the mig backend needs a GPU model with MIG profiles; pin one "
                        "with pod annotation " GQ_ANN_GPU_MODEL,
                        o->field, text);
        if (!p) {
            const gq_mig_profile *big = &x->model->mig[x->model->n_mig - 1];
            gq_format_bytes(big->memory, have);
            return fail(err, GQ_EINVAL, o,
                        "%s \"%s\" does not fit any MIG profile of %s; the largest is %s (%s)",
                        o->field, text, x->model->name, big->name, have);
        }
        c->charged_per_gpu = p->memory;
        return GQ_OK;
    }
    }
    return fail(err, GQ_EUNSUPPORTED, o, "unknown backend");
}

/* aliyun.com/gpu-mem: a whole number of memory units on one GPU. */
static gq_code aliyun_cost(const pc_ctx *x, const ctr_in *in, const char *ctr, gq_ctr_cost *c,
                           gq_err *err)
{
    origin o = {ctr, GQ_RES_ALIYUN_MEM};
    int64_t units = 0;
    if (!gq_quantity_is_integer(&in->aliyun.q) || gq_quantity_is_negative(&in->aliyun.q) ||
        gq_quantity_is_zero(&in->aliyun.q))
        return fail(err, GQ_EINVAL, &o,
                    "%s \"%s\" is not valid: it counts memory units and must be a positive "
                    "whole number",
                    o.field, in->aliyun.text);
    if (gq_quantity_to_int64_ceil(&in->aliyun.q, &units) ||
        __builtin_mul_overflow(units, x->cfg->memory_unit, &c->memory_per_gpu))
        return fail(err, GQ_ERANGE, &o, "%s \"%s\" is too large", o.field, in->aliyun.text);
    c->gpus = 1;
    c->charged_per_gpu = c->memory_per_gpu;
    set_original(c, "%s=%s", o.field, in->aliyun.text);
    return GQ_OK;
}

/* volcano.sh/vgpu-number and vgpu-memory: memory in MiB, else whole GPUs
 * of the pinned model. */
static gq_code volcano_cost(const pc_ctx *x, const ctr_in *in, const char *ctr, gq_ctr_cost *c,
                            gq_err *err)
{
    origin on = {ctr, GQ_RES_VOLCANO_NUMBER}, om = {ctr, GQ_RES_VOLCANO_MEMORY};
    gq_code rc;
    c->gpus = 1;
    if (in->volc_n.present && (rc = read_count(&in->volc_n, &on, &c->gpus, err)))
        return rc;
    if (in->volc_mem.present) {
        rc = read_memory(&in->volc_mem, &om, MIB, &c->memory_per_gpu, err);
        if (rc)
            return rc;
    } else {
        if ((rc = need_model(x, &on, &in->volc_n, err)))
            return rc;
        c->memory_per_gpu = x->model->memory;
    }
    c->charged_per_gpu = c->memory_per_gpu;
    set_original(c, "%s=%s,%s=%s", on.field, in->volc_n.present ? in->volc_n.text : "1", om.field,
                 in->volc_mem.present ? in->volc_mem.text : "(whole GPU)");
    return GQ_OK;
}

/* nvidia.com/mig-<profile>: instances of a profile the model has. */
static gq_code mig_cost(const pc_ctx *x, const ctr_in *in, const char *ctr, gq_ctr_cost *c,
                        gq_err *err)
{
    origin o = {ctr, in->mig_key};
    const char *pname = in->mig_key + strlen(GQ_RES_MIG_PREFIX);
    const gq_mig_profile *p = mig_by_name(x->cfg, x->model, pname);
    gq_code rc = read_count(&in->mig, &o, &c->gpus, err);
    if (rc)
        return rc;
    if (!p)
        return fail(err, GQ_EINVAL, &o, "%s \"%s\": unknown MIG profile \"%s\"%s%s", o.field,
                    in->mig.text, pname, x->model ? " for GPU model " : "",
                    x->model ? x->model->name : "");
    c->memory_per_gpu = c->charged_per_gpu = p->memory;
    set_original(c, "%s=%s", o.field, in->mig.text);
    return GQ_OK;
}

/* nvidia.com/gpu.shared: time-sliced replicas; memory is not in the
 * resources, so read what the webhook recorded, else a whole card. */
static gq_code shared_cost(const pc_ctx *x, const ctr_in *in, const char *ctr, gq_ctr_cost *c,
                           gq_err *err)
{
    origin o = {ctr, GQ_RES_SHARED_GPU};
    gq_code rc = read_count(&in->shared, &o, &c->gpus, err);
    if (rc)
        return rc;
    c->memory_per_gpu = recorded_memory(x->recorded, ctr);
    if (!c->memory_per_gpu && !x->model && x->trust != GQ_TRUST_REQUEST && x->unknown) {
        /* A pod that exists holds its cards whatever it says: a GPU is
         * never free, so whole cards of the largest model it may use. */
        c->priced_as = x->unknown;
        c->memory_per_gpu = x->unknown->memory;
    }
    if (!c->memory_per_gpu) {
        if ((rc = need_model(x, &o, &in->shared, err)))
            return rc;
        c->memory_per_gpu = x->model->memory;
    }
    if (round_up(c->memory_per_gpu, x->cfg->memory_unit, &c->charged_per_gpu))
        return fail(err, GQ_ERANGE, &o, "%s \"%s\" is too large", o.field, in->shared.text);
    set_original(c, "%s=%s", o.field, in->shared.text);
    return GQ_OK;
}

/* Backend output forms: the rewritten pod costs what its resources reserve. */
static gq_code backend_cost(const pc_ctx *x, const ctr_in *in, const char *ctr, gq_ctr_cost *c,
                            gq_err *err)
{
    c->form = GQ_FORM_BACKEND;
    if (in->aliyun.present)
        return aliyun_cost(x, in, ctr, c, err);
    if (in->volc_n.present || in->volc_mem.present)
        return volcano_cost(x, in, ctr, c, err);
    if (in->mig.present)
        return mig_cost(x, in, ctr, c, err);
    return shared_cost(x, in, ctr, c, err);
}

/* Apply the pod's request annotation to container c. */
static gq_code annotation_cost(const pc_ctx *x, const char *ctr, gq_ctr_cost *c, gq_err *err)
{
    const pod_req *pr = x->preq;
    char field[64];
    snprintf(field, sizeof(field), "pod annotation %s", pr->key);
    origin o = {ctr, field};
    gq_code rc;
    int64_t nanos = 0;
    c->form = pr->form;
    c->gpus = 1;
    switch (pr->form) {
    case GQ_FORM_ANN_FRACTION:
    case GQ_FORM_KAI_FRACTION:
        if ((rc = read_fraction(&pr->v, &o, &nanos, err)) || (rc = need_model(x, &o, &pr->v, err)))
            return rc;
        c->memory_per_gpu = mul_frac_ceil(x->model->memory, nanos, NANO);
        break;
    case GQ_FORM_ANN_MEMORY:
        if ((rc = read_memory(&pr->v, &o, 1, &c->memory_per_gpu, err)))
            return rc;
        break;
    default: /* GQ_FORM_KAI_MEMORY */
        if ((rc = read_memory(&pr->v, &o, MIB, &c->memory_per_gpu, err)))
            return rc;
        break;
    }
    set_original(c, "%s=%s", pr->key, pr->v.text);
    return charge_slice(x, &o, pr->v.text, c, err);
}

/* nvidia.com/gpumem-percentage (origin o): a whole percentage of the
 * model's memory. */
static gq_code hami_percent_memory(const pc_ctx *x, const qval *mv, const origin *o, gq_ctr_cost *c,
                                   gq_err *err)
{
    int64_t pct = 0;
    if (!gq_quantity_is_integer(&mv->q) || gq_quantity_to_int64_ceil(&mv->q, &pct) || pct < 1 ||
        pct > 100)
        return fail(err, GQ_EINVAL, o,
                    "%s \"%s\" is not valid: a percentage of GPU memory must be a whole "
                    "number from 1 to 100",
                    o->field, mv->text);
    gq_code rc = need_model(x, o, mv, err);
    if (rc)
        return rc;
    c->memory_per_gpu = mul_frac_ceil(x->model->memory, pct, 100);
    return GQ_OK;
}

/* A slice asked for as memory (gpu-memory, HAMi memory or percentage), on
 * nvidia.com/gpu GPUs (one when absent). */
static gq_code memory_slice_cost(const pc_ctx *x, const ctr_in *in, const char *ctr, gq_ctr_cost *c,
                                 gq_err *err)
{
    origin og = {ctr, GQ_RES_NVIDIA_GPU}, o = {ctr, NULL};
    const qval *mv;
    gq_code rc;
    if (in->gpu.present && (rc = read_count(&in->gpu, &og, &c->gpus, err)))
        return rc;
    if (in->mem.present) {
        o.field = GQ_RES_GPU_MEMORY;
        c->form = GQ_FORM_MEMORY;
        mv = &in->mem;
        rc = read_memory(mv, &o, 1, &c->memory_per_gpu, err);
    } else if (in->hami_mem.present) {
        o.field = GQ_RES_HAMI_MEMORY;
        c->form = GQ_FORM_HAMI_MEMORY;
        mv = &in->hami_mem;
        rc = read_memory(mv, &o, MIB, &c->memory_per_gpu, err);
    } else {
        o.field = GQ_RES_HAMI_PERCENT;
        c->form = GQ_FORM_HAMI_PERCENT;
        mv = &in->hami_pct;
        rc = hami_percent_memory(x, mv, &o, c, err);
    }
    if (rc)
        return rc;
    if (in->gpu.present)
        set_original(c, "%s=%s,%s=%s", o.field, mv->text, GQ_RES_NVIDIA_GPU, in->gpu.text);
    else
        set_original(c, "%s=%s", o.field, mv->text);
    return charge_slice(x, &o, mv->text, c, err);
}

/* Resource forms the webhook rewrites (gpu-memory, fraction, HAMi, whole). */
static gq_code resource_cost(const pc_ctx *x, const ctr_in *in, const char *ctr, gq_ctr_cost *c,
                             gq_err *err)
{
    origin og = {ctr, GQ_RES_NVIDIA_GPU};
    gq_code rc;
    c->gpus = 1;
    if (in->mem.present || in->hami_mem.present || in->hami_pct.present)
        return memory_slice_cost(x, in, ctr, c, err);
    set_original(c, "%s=%s", GQ_RES_NVIDIA_GPU, in->gpu.text);
    if (gq_quantity_is_integer(&in->gpu.q) && !gq_quantity_is_negative(&in->gpu.q) &&
        !gq_quantity_is_zero(&in->gpu.q)) {
        if ((rc = read_count(&in->gpu, &og, &c->gpus, err)))
            return rc;
        c->form = GQ_FORM_WHOLE;
        c->exclusive = true;
        if (!x->model)
            c->priced_as = x->unknown; /* a GPU is never free */
        const gq_model *m = x->model ? x->model : x->unknown;
        c->memory_per_gpu = c->charged_per_gpu = m ? m->memory : 0;
        return GQ_OK;
    }
    int64_t nanos = 0;
    c->form = GQ_FORM_FRACTION;
    if ((rc = read_fraction(&in->gpu, &og, &nanos, err)) ||
        (rc = need_model(x, &og, &in->gpu, err)))
        return rc;
    c->memory_per_gpu = mul_frac_ceil(x->model->memory, nanos, NANO);
    return charge_slice(x, &og, in->gpu.text, c, err);
}

/* Which request families a container uses; more than one is ambiguous. */
static gq_code check_one_form(const ctr_in *in, const char *ctr, gq_err *err)
{
    const struct {
        bool on;
        const char *name;
    } fams[] = {
        {in->mem.present, GQ_RES_GPU_MEMORY},
        {in->hami_mem.present, GQ_RES_HAMI_MEMORY},
        {in->hami_pct.present, GQ_RES_HAMI_PERCENT},
        {in->aliyun.present, GQ_RES_ALIYUN_MEM},
        {in->volc_n.present || in->volc_mem.present, "volcano.sh/vgpu-*"},
        {in->mig.present, in->mig_key},
        {in->shared.present, GQ_RES_SHARED_GPU},
    };
    const char *first = NULL;
    bool backend = false;
    for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++) {
        if (!fams[i].on)
            continue;
        if (first)
            return gq_err_set(err, GQ_EINVAL,
                              "container \"%s\": %s and %s both ask for GPU memory; use one form",
                              ctr, first, fams[i].name);
        first = fams[i].name;
        backend = i >= 3;
    }
    if (backend && in->gpu.present)
        return gq_err_set(err, GQ_EINVAL,
                          "container \"%s\": " GQ_RES_NVIDIA_GPU " cannot be combined with %s", ctr,
                          first);
    return GQ_OK;
}

/* Read container c (JSON object at path) into out; *uses says whether it
 * asks for a GPU at all. */
static gq_code ctr_cost(const pc_ctx *x, json_object *c, const char *path, gq_ctr_cost *out,
                        bool *uses, gq_err *err)
{
    const char *name = NULL;
    json_object *res = NULL;
    ctr_in in;
    char field[96];
    gq_code rc;
    *uses = false;
    if (!json_object_is_type(c, json_type_object))
        return gq_err_set(err, GQ_EINVAL, "%s must be an object", path);
    snprintf(field, sizeof(field), "%s.name", path);
    if ((rc = get_string(c, "name", field, &name, err)))
        return rc;
    if (!name)
        return gq_err_set(err, GQ_EINVAL, "%s.name is required", path);
    snprintf(out->name, sizeof(out->name), "%s", name);
    snprintf(field, sizeof(field), "%s.resources", path);
    if ((rc = get_object(c, "resources", field, &res, err)))
        return rc;
    if ((rc = read_ctr_in(res, out->name, path, &in, err)) ||
        (rc = check_one_form(&in, out->name, err)))
        return rc;
    bool has_backend = in.aliyun.present || in.volc_n.present || in.volc_mem.present ||
                       in.mig.present || in.shared.present;
    bool has_input = in.gpu.present || in.mem.present || in.hami_mem.present || in.hami_pct.present;
    if (x->preq->form != GQ_FORM_NONE && x->preq->target == c) {
        /* A managed pod was rewritten already: its resources are what the
         * device plugin reserves and the annotation is history. */
        if ((has_input || has_backend) && !x->managed)
            return gq_err_set(err, GQ_EINVAL,
                              "container \"%s\": pod annotation %s conflicts with the GPU request "
                              "in the container's resources; use one of them",
                              out->name, x->preq->key);
        if (!has_input && !has_backend) {
            *uses = true;
            return annotation_cost(x, out->name, out, err);
        }
    }
    if (has_backend) {
        *uses = true;
        return backend_cost(x, &in, out->name, out, err);
    }
    if (has_input) {
        *uses = true;
        return resource_cost(x, &in, out->name, out, err);
    }
    return GQ_OK;
}

/* ---- the pod ------------------------------------------------------------ */

/* Running sums of the Kubernetes effective request rule (KEP-753), for one
 * quota key. */
typedef struct eff {
    int64_t app, sidecars, init_max;
} eff;

static gq_code eff_add(eff *e, gq_ctr_kind kind, int64_t v)
{
    int64_t t;
    switch (kind) {
    case GQ_CTR_APP:
        return add_i64(e->app, v, &e->app);
    case GQ_CTR_SIDECAR:
        /* a sidecar runs alongside everything declared after it */
        if (add_i64(e->sidecars, v, &e->sidecars))
            return GQ_ERANGE;
        if (e->sidecars > e->init_max)
            e->init_max = e->sidecars;
        return GQ_OK;
    case GQ_CTR_INIT:
        if (add_i64(v, e->sidecars, &t))
            return GQ_ERANGE;
        if (t > e->init_max)
            e->init_max = t;
        return GQ_OK;
    }
    return GQ_OK;
}

static gq_code eff_total(const eff *e, int64_t *out)
{
    int64_t t;
    if (add_i64(e->app, e->sidecars, &t))
        return GQ_ERANGE;
    *out = t > e->init_max ? t : e->init_max;
    return GQ_OK;
}

static gq_code read_overhead(json_object *spec, int64_t *out, gq_err *err)
{
    json_object *oh = NULL, *v = NULL;
    qval q;
    origin o = {NULL, "spec.overhead[\"" GQ_RES_GPU_MEMORY "\"]"};
    gq_code rc = get_object(spec, "overhead", "spec.overhead", &oh, err);
    *out = 0;
    if (rc || !oh || !json_object_object_get_ex(oh, GQ_RES_GPU_MEMORY, &v) || !v)
        return rc;
    if ((rc = read_quantity(v, &o, &q, err)))
        return rc;
    if (gq_quantity_is_negative(&q.q))
        return gq_err_set(err, GQ_EINVAL, "%s \"%s\" must not be negative", o.field, q.text);
    if (gq_quantity_to_int64_ceil(&q.q, out))
        return gq_err_set(err, GQ_ERANGE, "%s \"%s\" is too large", o.field, q.text);
    return GQ_OK;
}

bool gq_pod_user_set(json_object *pod, bool label, const char *key)
{
    json_object *meta = NULL, *mf = NULL;
    char fkey[GQ_META_KEY_MAX + 3];
    if (!key || strlen(key) > GQ_META_KEY_MAX ||
        !json_object_object_get_ex(pod, "metadata", &meta) ||
        !json_object_object_get_ex(meta, "managedFields", &mf) ||
        !json_object_is_type(mf, json_type_array))
        return false;
    snprintf(fkey, sizeof(fkey), "f:%s", key);
    size_t n = json_object_array_length(mf);
    for (size_t i = 0; i < n; i++) {
        json_object *fields, *m, *map, *leaf;
        if (json_object_object_get_ex(json_object_array_get_idx(mf, i), "fieldsV1", &fields) &&
            json_object_object_get_ex(fields, "f:metadata", &m) &&
            json_object_object_get_ex(m, label ? "f:labels" : "f:annotations", &map) &&
            json_object_object_get_ex(map, fkey, &leaf))
            return true;
    }
    return false;
}

bool gq_pod_managed(json_object *pod)
{
    json_object *meta, *labels, *v;
    return json_object_object_get_ex(pod, "metadata", &meta) &&
           json_object_object_get_ex(meta, "labels", &labels) &&
           json_object_object_get_ex(labels, GQ_LABEL_MANAGED, &v) &&
           json_object_is_type(v, json_type_string) && !strcmp(json_object_get_string(v), "true") &&
           !gq_pod_user_set(pod, true, GQ_LABEL_MANAGED);
}

/* Whether every allowedModels list of the GPULimitRanges in scope names m. */
static bool model_allowed(const gq_cost_scope *scope, const gq_model *m)
{
    for (size_t i = 0; scope && i < scope->n_lrs; i++) {
        const gq_limit_range *lr = scope->lrs[i];
        for (size_t j = 0; lr && j < lr->n_items; j++) {
            const gq_limit_item *it = &lr->items[j];
            bool named = it->n_allowed_models == 0;
            for (size_t k = 0; !named && k < it->n_allowed_models; k++)
                named = strcasecmp(it->allowed_models[k], m->name) == 0;
            if (!named)
                return false;
        }
    }
    return true;
}

/* The model a whole GPU of unknown model is charged as: the largest the
 * namespace may use, else the largest of the catalog. */
static const gq_model *largest_model(const gq_config *cfg, const gq_cost_scope *scope)
{
    const gq_model *best = NULL, *any = NULL;
    for (size_t i = 0; i < cfg->n_models; i++) {
        const gq_model *m = &cfg->models[i];
        if (!any || m->memory > any->memory)
            any = m;
        if ((!best || m->memory > best->memory) && model_allowed(scope, m))
            best = m;
    }
    return best ? best : any;
}

gq_code gq_pod_cost_compute(const gq_config *cfg, json_object *pod, gq_pod_cost *out, gq_err *err)
{
    return gq_pod_cost_compute_in(cfg, pod, NULL, out, err);
}

static gq_code claims_cost(const gq_config *cfg, json_object *spec, json_object *ann,
                           json_object *pod, gq_pod_cost *r, gq_err *err);

/* The cost of container c, spec.containers[idx] or (init)
 * spec.initContainers[idx], a sidecar when its restartPolicy is Always;
 * *uses false when it asks for no GPU. */
static gq_code container_cost(const pc_ctx *x, json_object *c, bool init, size_t idx,
                              gq_ctr_cost *cc, bool *uses, gq_err *err)
{
    char path[64];
    snprintf(path, sizeof(path), "spec.%s[%zu]", init ? "initContainers" : "containers", idx);
    memset(cc, 0, sizeof(*cc));
    cc->index = idx;
    cc->kind = GQ_CTR_APP;
    if (init) {
        const char *policy = NULL;
        char field[96];
        snprintf(field, sizeof(field), "%s.restartPolicy", path);
        gq_code rc = get_string(c, "restartPolicy", field, &policy, err);
        if (rc)
            return rc;
        cc->kind = policy && !strcmp(policy, "Always") ? GQ_CTR_SIDECAR : GQ_CTR_INIT;
    }
    return ctr_cost(x, c, path, cc, uses, err);
}

/* The pod's metadata.annotations, spec, spec.containers and
 * spec.initContainers (each NULL when absent; a wrong type is an error, and
 * so is a pod with no spec). */
static gq_code pod_parts(json_object *pod, json_object **ann, json_object **spec,
                         json_object **ctrs, json_object **inits, gq_err *err)
{
    json_object *meta = NULL;
    gq_code rc;
    if (!pod || !json_object_is_type(pod, json_type_object))
        return gq_err_set(err, GQ_EINVAL, "a pod must be a JSON object");
    if ((rc = get_object(pod, "metadata", "metadata", &meta, err)) ||
        (rc = get_object(meta, "annotations", "metadata.annotations", ann, err)) ||
        (rc = get_object(pod, "spec", "spec", spec, err)))
        return rc;
    if (!*spec)
        return gq_err_set(err, GQ_EINVAL, "spec is required");
    if ((rc = get_array(*spec, "containers", "spec.containers", ctrs, err)) ||
        (rc = get_array(*spec, "initContainers", "spec.initContainers", inits, err)))
        return rc;
    return GQ_OK;
}

/* The containers' share of the pod's cost: the cost of each that uses a
 * GPU in r->ctrs, and the pod's GPU memory (with its overhead) and whole
 * GPUs by the effective request rule. */
static gq_code containers_cost(const pc_ctx *x, json_object *ctrs, json_object *inits,
                               int64_t overhead, gq_pod_cost *r, gq_err *err)
{
    size_t n_app = ctrs ? json_object_array_length(ctrs) : 0;
    size_t n_init = inits ? json_object_array_length(inits) : 0;
    eff emem = {0}, egpu = {0};
    gq_code rc;
    /* The container cap bounds the work for GPU pods only: a pod that asks
     * for no GPU passes however many containers it has (DESIGN.md §8). */
    bool too_many = n_app + n_init > GQ_POD_MAX_CONTAINERS;
    if (n_app + n_init && !too_many && !(r->ctrs = calloc(n_app + n_init, sizeof(*r->ctrs))))
        return gq_err_oom(err);
    for (size_t i = 0; i < n_init + n_app; i++) {
        bool init = i < n_init;
        size_t idx = init ? i : i - n_init;
        gq_ctr_cost cc;
        bool uses = false;
        if ((rc = container_cost(x, json_object_array_get_idx(init ? inits : ctrs, idx), init, idx,
                                 &cc, &uses, err)))
            return rc;
        if (!uses)
            continue;
        if (too_many)
            return gq_err_set(err, GQ_EINVAL,
                              "container \"%s\" asks for a GPU and the pod has %zu containers "
                              "(app and init); a pod that uses a GPU may have at most %d",
                              cc.name, n_app + n_init, GQ_POD_MAX_CONTAINERS);
        int64_t mem;
        if (__builtin_mul_overflow(cc.gpus, cc.charged_per_gpu, &mem) ||
            eff_add(&emem, cc.kind, mem) || eff_add(&egpu, cc.kind, cc.exclusive ? cc.gpus : 0))
            return gq_err_set(err, GQ_ERANGE, "container \"%s\": GPU memory of the pod overflows",
                              cc.name);
        r->priced_unknown |= cc.priced_as != NULL;
        r->ctrs[r->n_ctrs++] = cc;
    }
    if (!r->n_ctrs)
        return GQ_OK;
    r->gpu_pods = 1;
    /* Overhead is charged only for pods that use a GPU: a RuntimeClass
     * overhead must not make CPU-only pods consume GPU quota. */
    if (eff_total(&emem, &r->gpu_memory) || add_i64(r->gpu_memory, overhead, &r->gpu_memory) ||
        eff_total(&egpu, &r->gpus))
        return gq_err_set(err, GQ_ERANGE, "GPU memory of the pod overflows");
    return GQ_OK;
}

gq_code gq_pod_cost_compute_in(const gq_config *cfg, json_object *pod, const gq_cost_scope *scope,
                               gq_pod_cost *out, gq_err *err)
{
    json_object *ann = NULL, *spec = NULL, *ctrs = NULL, *inits = NULL;
    gq_pod_cost r;
    pod_req preq = {.form = GQ_FORM_NONE};
    int64_t overhead = 0;
    gq_code rc;
    gq_pod_cost_init(&r);
    if (!cfg || !out)
        return gq_err_set(err, GQ_EINVAL, "no configuration or result given");
    if ((rc = pod_parts(pod, &ann, &spec, &ctrs, &inits, err)))
        goto out;
    gq_pod_trust trust = scope ? scope->trust : GQ_TRUST_REQUEST;
    if (trust == GQ_TRUST_SPEC)
        ann = NULL; /* never checked by gpuquota: not one annotation counts */
    if ((rc = resolve_model(cfg, ann, spec, &r.model, &r.model_pinned, err)) ||
        (trust == GQ_TRUST_REQUEST && (rc = read_pod_req(ann, ctrs, inits, &preq, err))) ||
        (rc = read_overhead(spec, &overhead, err)))
        goto out;
    /* What gpuquota wrote is read back only where the author of the pod
     * did not write it: a user's copy of our label or records never
     * changes what the pod is charged. */
    bool managed = trust == GQ_TRUST_RECORDS || (trust == GQ_TRUST_REQUEST && gq_pod_managed(pod));
    json_object *recorded =
        trust == GQ_TRUST_RECORDS || (managed && !gq_pod_user_set(pod, false, GQ_ANN_REQUESTS))
            ? ann
            : NULL;
    pc_ctx x = {cfg, r.model, largest_model(cfg, scope), recorded, &preq, managed, trust};
    if ((rc = containers_cost(&x, ctrs, inits, overhead, &r, err)))
        goto out;
    rc = claims_cost(cfg, spec, managed ? ann : NULL, trust == GQ_TRUST_REQUEST ? pod : NULL, &r,
                     err);
out:
    if (rc) {
        /* the contract: an error leaves *out empty, never half-filled */
        gq_pod_cost_dispose(&r);
        gq_pod_cost_dispose(out);
        return rc;
    }
    gq_pod_cost_dispose(out);
    *out = r;
    return GQ_OK;
}

bool gq_claim_record_read(const gq_config *cfg, json_object *rec, gq_shared_claim *sc, bool *shared)
{
    json_object *g = NULL, *m = NULL, *mo = NULL, *cn = NULL, *cu = NULL;
    gq_quantity q;
    gq_err e;
    int64_t mem_v = 0, *mem = &mem_v;
    memset(sc, 0, sizeof(*sc));
    if (!json_object_is_type(rec, json_type_object) ||
        !json_object_object_get_ex(rec, "gpus", &g) || !json_object_is_type(g, json_type_int) ||
        json_object_get_int64(g) < 0 || !json_object_object_get_ex(rec, "memory", &m) ||
        !json_object_is_type(m, json_type_string) ||
        gq_quantity_parse(json_object_get_string(m), (size_t)json_object_get_string_len(m), &q,
                          &e) ||
        gq_quantity_is_negative(&q) || gq_quantity_to_int64_ceil(&q, mem))
        return false;
    sc->gpus = json_object_get_int64(g);
    sc->memory = *mem;
    if (json_object_object_get_ex(rec, "model", &mo)) {
        if (!json_object_is_type(mo, json_type_string) ||
            !(sc->model = gq_config_find_model(cfg, json_object_get_string(mo))))
            return false;
    }
    bool has_name = json_object_object_get_ex(rec, "claim", &cn),
         has_uid = json_object_object_get_ex(rec, "uid", &cu);
    *shared = has_name || has_uid;
    if (!*shared)
        return true;
    if (!has_name || !has_uid || !json_object_is_type(cn, json_type_string) ||
        !json_object_is_type(cu, json_type_string) || !json_object_get_string_len(cn) ||
        (size_t)json_object_get_string_len(cn) >= sizeof(sc->name) ||
        !json_object_get_string_len(cu) ||
        (size_t)json_object_get_string_len(cu) >= sizeof(sc->uid))
        return false;
    memcpy(sc->name, json_object_get_string(cn), (size_t)json_object_get_string_len(cn));
    memcpy(sc->uid, json_object_get_string(cu), (size_t)json_object_get_string_len(cu));
    return true;
}

/* What the pod's priced claims add up to. */
typedef struct claims_sum {
    int64_t gpus, memory;
    const gq_model *model; /* the model of the last claim with devices */
    bool first, same;      /* no claim with devices yet; all of one model */
} claims_sum;

/* Add claim c, priced by its record in recs, to s; a claim without a
 * record leaves the pod's claims unpriced. A shared claim's record goes
 * into r->shared. */
static gq_code claim_add(const gq_config *cfg, json_object *c, json_object *recs, claims_sum *s,
                         gq_pod_cost *r, gq_err *err)
{
    json_object *nm = NULL, *rec = NULL;
    gq_shared_claim sc;
    bool shared = false;
    if (!json_object_object_get_ex(c, "name", &nm) || !json_object_is_type(nm, json_type_string) ||
        !json_object_object_get_ex(recs, json_object_get_string(nm), &rec) ||
        !gq_claim_record_read(cfg, rec, &sc, &shared)) {
        r->claims_unpriced = true;
        return GQ_OK;
    }
    if (add_i64(s->gpus, sc.gpus, &s->gpus) || add_i64(s->memory, sc.memory, &s->memory))
        return gq_err_set(err, GQ_ERANGE, "GPU devices of the pod's claims overflow");
    if (sc.gpus) {
        s->same = s->same && (s->first || sc.model == s->model);
        s->model = sc.model;
        s->first = false;
    }
    if (shared && sc.gpus) {
        if (!r->shared && !(r->shared = calloc(GQ_POD_MAX_CLAIMS, sizeof(*r->shared))))
            return gq_err_oom(err);
        r->shared[r->n_shared++] = sc;
    }
    return GQ_OK;
}

/* Add the GPU devices of the pod's DRA claims, from the record gpuquota
 * wrote (ann is NULL unless gpuquota manages the pod; pod, when given, is
 * asked whether its author wrote the record: gq_pod_user_set). An entry
 * without a record leaves its devices unknown: claims_unpriced. */
static gq_code claims_cost(const gq_config *cfg, json_object *spec, json_object *ann,
                           json_object *pod, gq_pod_cost *r, gq_err *err)
{
    json_object *claims = NULL, *recs = NULL;
    const char *text = NULL;
    gq_code rc = get_array(spec, "resourceClaims", "spec.resourceClaims", &claims, err);
    if (rc || !claims || !json_object_array_length(claims))
        return rc;
    size_t n = json_object_array_length(claims);
    if (ann && !(pod && gq_pod_user_set(pod, false, GQ_ANN_CLAIMS)) &&
        (rc = get_string(ann, GQ_ANN_CLAIMS, "metadata.annotations[\"" GQ_ANN_CLAIMS "\"]", &text,
                         err)))
        return rc;
    gq_err e;
    if (!text || n > GQ_POD_MAX_CLAIMS || gq_json_parse(text, strlen(text), 4, &recs, &e) ||
        !json_object_is_type(recs, json_type_object)) {
        r->claims_unpriced = true;
        json_object_put(recs);
        return GQ_OK;
    }
    claims_sum s = {.first = true, .same = true};
    for (size_t i = 0; i < n && !rc; i++)
        rc = claim_add(cfg, json_object_array_get_idx(claims, i), recs, &s, r, err);
    json_object_put(recs);
    if (rc || !s.gpus)
        return rc;
    if (add_i64(r->gpus, s.gpus, &r->gpus) || add_i64(r->gpu_memory, s.memory, &r->gpu_memory))
        return gq_err_set(err, GQ_ERANGE, "GPU memory of the pod overflows");
    r->claim_gpus = s.gpus;
    r->claim_memory = s.memory;
    r->gpu_pods = 1;
    /* Devices a selector or the class pins to one model pin the pod. */
    if (s.same && s.model && !r->model_pinned) {
        r->model = s.model;
        r->model_pinned = true;
    }
    return GQ_OK;
}

bool gq_pod_is_terminal(json_object *pod)
{
    json_object *st, *ph;
    if (!json_object_object_get_ex(pod, "status", &st) ||
        !json_object_object_get_ex(st, "phase", &ph) || !json_object_is_type(ph, json_type_string))
        return false;
    const char *p = json_object_get_string(ph);
    return !strcmp(p, "Succeeded") || !strcmp(p, "Failed");
}
