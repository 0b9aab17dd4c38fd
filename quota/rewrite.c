/* The mutating webhook's rewrite (see rewrite.h and docs/rewrite.md).
 *
 * Every operation is computed against the pod exactly as it was sent: only
 * members that differ from what we want are touched, a missing parent is
 * created whole (never `add` under a missing parent), and maps are never
 * replaced wholesale, so user data next to ours survives. */
#include "quota/rewrite.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonutil.h"
#include "quota/quantity.h"
#include "common/json_member.h"
#include "quota/policy.h"
#include "quota/record.h"

#define MIB ((int64_t)1 << 20)
#define REQUIRED_TERMS "requiredDuringSchedulingIgnoredDuringExecution"
#define DEFAULT_SCHEDULER "default-scheduler"

static const char *const gpu_resources[] = {
    GQ_RES_GPU_MEMORY, GQ_RES_NVIDIA_GPU,     GQ_RES_HAMI_MEMORY,    GQ_RES_HAMI_PERCENT,
    GQ_RES_ALIYUN_MEM, GQ_RES_VOLCANO_NUMBER, GQ_RES_VOLCANO_MEMORY, GQ_RES_SHARED_GPU,
};

bool gq_is_gpu_resource(const char *name)
{
    if (!name)
        return false;
    for (size_t i = 0; i < sizeof(gpu_resources) / sizeof(gpu_resources[0]); i++)
        if (!strcmp(name, gpu_resources[i]))
            return true;
    return !strncmp(name, GQ_RES_MIG_PREFIX, strlen(GQ_RES_MIG_PREFIX)) &&
           name[strlen(GQ_RES_MIG_PREFIX)];
}

void gq_rewrite_init(gq_rewrite *r)
{
    memset(r, 0, sizeof(*r));
}

void gq_rewrite_dispose(gq_rewrite *r)
{
    if (!r)
        return;
    gq_patch_free(r->patch);
    json_object_put(r->originals);
    json_object_put(r->changes);
    memset(r, 0, sizeof(*r));
}

/* The container a cost entry describes. */
static json_object *container_of(json_object *spec, const gq_ctr_cost *c, const char **list)
{
    *list = c->kind == GQ_CTR_APP ? "containers" : "initContainers";
    json_object *arr = gq_json_get_typed(spec, *list, json_type_array);
    if (!arr || c->index >= json_object_array_length(arr))
        return NULL;
    return json_object_array_get_idx(arr, c->index);
}

/* ---- GPULimitRange defaults --------------------------------------------- */

gq_code gq_pod_apply_defaults(json_object *pod, const gq_ctr_default *defaults, size_t n,
                              json_object **out, gq_err *err)
{
    gq_code rc = GQ_OK;
    json_object *copy = NULL;
    if (json_object_deep_copy(pod, &copy, NULL))
        return gq_err_oom(err);
    json_object *spec = gq_json_member(copy, "spec");
    for (size_t i = 0; i < n; i++) {
        const gq_ctr_default *d = &defaults[i];
        gq_ctr_cost probe = {.kind = d->kind, .index = d->index};
        const char *list;
        json_object *ctr = container_of(spec, &probe, &list);
        json_object *res = gq_json_get_typed(ctr, "resources", json_type_object);
        json_object *limits = gq_json_get_typed(res, "limits", json_type_object);
        if (!limits) {
            rc = gq_err_set(err, GQ_EINVAL,
                            "GPULimitRange default for container \"%s\": spec.%s[%zu] has no "
                            "resources.limits",
                            d->name, list, d->index);
            goto out;
        }
        char mem[GQ_QUANTITY_STR_MAX];
        gq_format_bytes(d->memory_per_gpu, mem);
        json_object *s = json_object_new_string(mem);
        if (!s || json_object_object_add(limits, GQ_RES_GPU_MEMORY, s)) {
            json_object_put(s);
            rc = gq_err_oom(err);
            goto out;
        }
    }
    *out = copy;
    copy = NULL;
out:
    json_object_put(copy);
    return rc;
}

/* ---- the rewrite --------------------------------------------------------- */

typedef struct kv {
    char key[96];
    char val[32];
} kv;

typedef struct rw {
    const gq_config *cfg;
    json_object *pod, *spec, *meta;
    const gq_pod_cost *cost;
    const gq_rewrite_opts *opts;
    gq_rewrite *res;
    gq_err *err;
    bool timeslicing_warned;
    json_object *changed_ctrs; /* containers whose resources changed: {name: resources} */
} rw;

static gq_code nomem(rw *x)
{
    return gq_err_oom(x->err);
}

/* Append an op; value is owned (NULL means allocation failed). */
static gq_code op_add(rw *x, const gq_jptr *p, json_object *value)
{
    if (!value)
        return nomem(x);
    gq_code rc = gq_patch_add(x->res->patch, p, value);
    if (rc == GQ_ELIMIT)
        return gq_err_set(x->err, rc, "the patch would exceed %d operations", GQ_PATCH_MAX_OPS);
    return rc ? nomem(x) : GQ_OK;
}

static gq_code op_remove(rw *x, const gq_jptr *p)
{
    gq_code rc = gq_patch_remove(x->res->patch, p);
    if (rc == GQ_ELIMIT)
        return gq_err_set(x->err, rc, "the patch would exceed %d operations", GQ_PATCH_MAX_OPS);
    return rc ? nomem(x) : GQ_OK;
}

/* {key: value}, value owned; NULL on failure. */
static json_object *wrap(const char *key, json_object *value)
{
    json_object *o = value ? json_object_new_object() : NULL;
    if (!o || json_object_object_add(o, key, value)) {
        json_object_put(o);
        json_object_put(value);
        return NULL;
    }
    return o;
}

/* [value], value owned; NULL on failure. */
static json_object *wrap_array(json_object *value)
{
    json_object *a = value ? json_object_new_array() : NULL;
    if (!a || json_object_array_add(a, value)) {
        json_object_put(a);
        json_object_put(value);
        return NULL;
    }
    return a;
}

static void warn(rw *x, const char *fmt, ...) GQ_PRINTF(2, 3);

static void warn(rw *x, const char *fmt, ...)
{
    gq_rewrite *r = x->res;
    if (r->n_warnings == GQ_REWRITE_WARNINGS) {
        r->dropped_warnings++;
        return;
    }
    char *w = r->warnings[r->n_warnings++];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(w, GQ_REWRITE_WARNING_MAX + 1, fmt, ap);
    va_end(ap);
    if (n > GQ_REWRITE_WARNING_MAX) {
        /* Cut on a UTF-8 character boundary. */
        size_t len = GQ_REWRITE_WARNING_MAX;
        while (len && ((unsigned char)w[len] & 0xc0) == 0x80)
            len--;
        w[len] = '\0';
    }
}

/* The smallest MIG profile of m that holds bytes (profiles are sorted). */
static const gq_mig_profile *mig_fit(const gq_model *m, int64_t bytes)
{
    for (size_t i = 0; m && i < m->n_mig; i++)
        if (m->mig[i].memory >= bytes)
            return &m->mig[i];
    return NULL;
}

static int64_t ceil_div(int64_t v, int64_t d)
{
    return v / d + (v % d != 0);
}

/* The backend resources container c must carry. */
static gq_code desired(rw *x, const gq_ctr_cost *c, kv des[2], size_t *n)
{
    const gq_config *cfg = x->cfg;
    memset(des, 0, 2 * sizeof(*des));
    *n = 0;
    switch (cfg->backend) {
    case GQ_BACKEND_ALIYUN:
        if (c->gpus != 1)
            return gq_err_set(x->err, GQ_EUNSUPPORTED,
                              "container \"%s\": the aliyun backend cannot split a container over "
                              "%" PRId64 " GPUs",
                              c->name, c->gpus);
        snprintf(des[0].key, sizeof(des[0].key), "%s", GQ_RES_ALIYUN_MEM);
        snprintf(des[0].val, sizeof(des[0].val), "%" PRId64,
                 ceil_div(c->charged_per_gpu, cfg->memory_unit));
        *n = 1;
        return GQ_OK;
    case GQ_BACKEND_HAMI:
    case GQ_BACKEND_VOLCANO: {
        bool hami = cfg->backend == GQ_BACKEND_HAMI;
        snprintf(des[0].key, sizeof(des[0].key), "%s",
                 hami ? GQ_RES_NVIDIA_GPU : GQ_RES_VOLCANO_NUMBER);
        snprintf(des[0].val, sizeof(des[0].val), "%" PRId64, c->gpus);
        snprintf(des[1].key, sizeof(des[1].key), "%s",
                 hami ? GQ_RES_HAMI_MEMORY : GQ_RES_VOLCANO_MEMORY);
        snprintf(des[1].val, sizeof(des[1].val), "%" PRId64, ceil_div(c->charged_per_gpu, MIB));
        *n = 2;
        return GQ_OK;
    }
    case GQ_BACKEND_MIG: {
        const gq_model *m = x->cost->model;
        const gq_mig_profile *p = mig_fit(m, c->memory_per_gpu);
        if (!p)
            return gq_err_set(x->err, GQ_EUNSUPPORTED,
                              "container \"%s\": no MIG profile of GPU model %s holds the request",
                              c->name, m ? m->name : "(none)");
        snprintf(des[0].key, sizeof(des[0].key), "%s%s", GQ_RES_MIG_PREFIX, p->name);
        snprintf(des[0].val, sizeof(des[0].val), "%" PRId64, c->gpus);
        *n = 1;
        return GQ_OK;
    }
    case GQ_BACKEND_TIMESLICING:
        snprintf(des[0].key, sizeof(des[0].key), "%s", GQ_RES_SHARED_GPU);
        snprintf(des[0].val, sizeof(des[0].val), "%" PRId64, c->gpus);
        *n = 1;
        return GQ_OK;
    }
    return gq_err_set(x->err, GQ_EUNSUPPORTED, "unknown backend");
}

static json_object *resource_map(const kv *des, size_t n)
{
    json_object *m = json_object_new_object();
    for (size_t i = 0; m && i < n; i++) {
        json_object *s = json_object_new_string(des[i].val);
        if (!s || json_object_object_add(m, des[i].key, s)) {
            json_object_put(s);
            json_object_put(m);
            return NULL;
        }
    }
    return m;
}

/* Bring one resource map (limits or requests) of a container to des. p
 * points at the map; its length is restored on return. */
static gq_code rewrite_map(rw *x, json_object *map, const kv *des, size_t n, gq_jptr *p,
                           bool *changed)
{
    gq_code rc = GQ_OK;
    size_t base = p->len;
    json_object_object_foreach(map, key, val)
    {
        (void)val;
        bool wanted = false;
        for (size_t i = 0; i < n; i++)
            wanted |= !strcmp(key, des[i].key);
        if (wanted || !gq_is_gpu_resource(key))
            continue;
        gq_jptr_push(p, key);
        rc = op_remove(x, p);
        gq_jptr_truncate(p, base);
        if (rc)
            return rc;
        *changed = true;
    }
    for (size_t i = 0; i < n; i++) {
        json_object *cur = gq_json_member(map, des[i].key);
        if (json_object_is_type(cur, json_type_string) &&
            !strcmp(json_object_get_string(cur), des[i].val))
            continue;
        gq_jptr_push(p, des[i].key);
        rc = op_add(x, p, json_object_new_string(des[i].val));
        gq_jptr_truncate(p, base);
        if (rc)
            return rc;
        *changed = true;
    }
    return GQ_OK;
}

/* The original GPU request of a container as {resource: value}: its GPU keys
 * in limits (else requests), or for a pod-annotation form the annotation. */
static json_object *original_of(json_object *ctr, const gq_ctr_cost *c)
{
    json_object *o = json_object_new_object();
    json_object *res = gq_json_member(ctr, "resources");
    const char *maps[] = {"limits", "requests"};
    for (size_t m = 0; o && m < 2 && json_object_object_length(o) == 0; m++) {
        json_object *map = gq_json_get_typed(res, maps[m], json_type_object);
        if (!map)
            continue;
        json_object_object_foreach(map, key, val)
        {
            if (gq_is_gpu_resource(key) && json_object_object_add(o, key, json_object_get(val))) {
                json_object_put(o);
                return NULL;
            }
        }
    }
    if (o && json_object_object_length(o) == 0) {
        /* Annotation forms: podcost records "key=value". */
        char key[sizeof(c->original)];
        snprintf(key, sizeof(key), "%s", c->original);
        char *eq = strchr(key, '=');
        const char *val = "";
        if (eq) {
            *eq = '\0';
            val = eq + 1;
        }
        json_object *s = json_object_new_string(val);
        if (!s || json_object_object_add(o, key, s)) {
            json_object_put(s);
            json_object_put(o);
            return NULL;
        }
    }
    return o;
}

/* "k v, k v" of a {resource: value} object, for warnings. */
static void describe(json_object *o, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    json_object_object_foreach(o, key, val)
    {
        int n = snprintf(buf + off, cap - off, "%s%s %s", off ? ", " : "", key,
                         json_object_is_type(val, json_type_string) ? json_object_get_string(val)
                                                                    : gq_json_compact(val));
        if (n < 0 || (size_t)n >= cap - off)
            return;
        off += (size_t)n;
    }
}

static const gq_ctr_default *default_for(const gq_rewrite_opts *o, const gq_ctr_cost *c)
{
    for (size_t i = 0; o && i < o->n_defaults; i++) {
        bool init = c->kind != GQ_CTR_APP, dinit = o->defaults[i].kind != GQ_CTR_APP;
        if (init == dinit && o->defaults[i].index == c->index)
            return &o->defaults[i];
    }
    return NULL;
}

/* Patch the resources of container ctr (at pointer p, ".../resources")
 * to the desired des[0..n); *changed when a patch was needed. */
static gq_code patch_resources(rw *x, json_object *ctr, gq_jptr *p, const kv *des, size_t n,
                               bool *changed)
{
    static const char *const maps[] = {"limits", "requests"};
    size_t at_res = p->len;
    gq_code rc = GQ_OK;
    json_object *res = gq_json_member(ctr, "resources");
    if (!json_object_is_type(res, json_type_object)) {
        *changed = true;
        return op_add(x, p, wrap("limits", resource_map(des, n)));
    }
    for (size_t m = 0; m < 2 && !rc; m++) {
        json_object *map = gq_json_get_typed(res, maps[m], json_type_object);
        gq_jptr_push(p, maps[m]);
        if (map) {
            rc = rewrite_map(x, map, des, n, p, changed);
        } else if (m == 0) {
            /* requests default to limits for extended resources. */
            rc = op_add(x, p, resource_map(des, n));
            *changed = true;
        }
        gq_jptr_truncate(p, at_res);
    }
    return rc;
}

/* Warn that container c's resources went from original to des[0..n),
 * with the most detail that fits the warning limit. */
static void warn_rewritten(rw *x, const gq_ctr_cost *c, json_object *original, const kv *des,
                           size_t n)
{
    char from[256], to[260], on[80] = "", mem[GQ_QUANTITY_STR_MAX] = "";
    char full[128] = "", brief[64] = "";
    describe(original, from, sizeof(from));
    snprintf(to, sizeof(to), "%s %s%s%s%s%s", des[0].key, des[0].val, n > 1 ? ", " : "",
             n > 1 ? des[1].key : "", n > 1 ? " " : "", n > 1 ? des[1].val : "");
    if (x->cost->model)
        snprintf(on, sizeof(on), " on %s", x->cost->model->name);
    const gq_ctr_default *d = default_for(x->opts, c);
    if (d) {
        gq_format_bytes(d->memory_per_gpu, mem);
        snprintf(full, sizeof(full), " (default %s from GPULimitRange %s)", mem,
                 d->limit_range ? d->limit_range : "");
        snprintf(brief, sizeof(brief), " (default %s)", mem);
    }
    /* Drop the GPULimitRange name, then the model, before cutting the
     * text. */
    const char *extra[] = {full, brief, brief};
    const char *model[] = {on, on, ""};
    size_t v = 0;
    for (; v < 2; v++) {
        int len =
            snprintf(NULL, 0, "container %s: %s%s%s -> %s", c->name, from, extra[v], model[v], to);
        if (len >= 0 && len <= GQ_REWRITE_WARNING_MAX)
            break;
    }
    warn(x, "container %s: %s%s%s -> %s", c->name, from, extra[v], model[v], to);
}

/* Rewrite one GPU container's resources; warn when anything changed. */
static gq_code rewrite_ctr(rw *x, const gq_ctr_cost *c, json_object *original)
{
    gq_code rc;
    kv des[2];
    size_t n = 0;
    bool changed = false;
    const char *list;
    json_object *ctr = container_of(x->spec, c, &list);
    if (!ctr)
        return gq_err_set(x->err, GQ_EINVAL, "container \"%s\" is not in the pod", c->name);
    if ((rc = desired(x, c, des, &n)))
        return rc;
    gq_jptr p;
    gq_jptr_init(&p);
    gq_jptr_push(&p, "spec");
    gq_jptr_push(&p, list);
    gq_jptr_push_index(&p, c->index);
    gq_jptr_push(&p, "resources");
    if ((rc = patch_resources(x, ctr, &p, des, n, &changed)) || !changed)
        return rc;
    json_object *now = resource_map(des, n);
    if (!now || json_object_object_add(x->changed_ctrs, c->name, now)) {
        json_object_put(now);
        return nomem(x);
    }
    warn_rewritten(x, c, original, des, n);
    if (x->cfg->backend == GQ_BACKEND_TIMESLICING && !x->timeslicing_warned) {
        x->timeslicing_warned = true;
        warn(x, "timeslicing: GPU memory is accounted, not isolated; a container can use more "
                "than it asked for");
    }
    return GQ_OK;
}

/* ---- model pin ------------------------------------------------------------ */

static const gq_model *chosen_of(const rw *x)
{
    return x->opts ? x->opts->chosen : NULL;
}

/* {"key":"nvidia.com/gpu.product","operator":"In","values":[products]} */
static json_object *pin_expression(const gq_model *m)
{
    json_object *e = json_object_new_object(), *vals = json_object_new_array();
    bool ok = e && vals;
    for (size_t i = 0; ok && i < m->n_products; i++) {
        json_object *s = json_object_new_string(m->products[i]);
        ok = s && !json_object_array_add(vals, s);
        if (!ok)
            json_object_put(s);
    }
    json_object *k = ok ? json_object_new_string(GQ_LABEL_GPU_PRODUCT) : NULL;
    ok = k && !json_object_object_add(e, "key", k);
    if (!ok)
        json_object_put(k);
    json_object *op = ok ? json_object_new_string("In") : NULL;
    ok = op && !json_object_object_add(e, "operator", op);
    if (!ok)
        json_object_put(op);
    if (!ok || json_object_object_add(e, "values", vals)) {
        json_object_put(vals);
        json_object_put(e);
        return NULL;
    }
    return e;
}

/* The pin wrapped `levels` times, from the expression (0) up to the whole
 * spec.affinity value (6). */
static json_object *pin_at_level(const gq_model *m, int levels)
{
    static const char *const keys[] = {
        NULL, "matchExpressions", NULL, "nodeSelectorTerms", REQUIRED_TERMS, "nodeAffinity"};
    json_object *v = pin_expression(m);
    for (int l = 1; v && l <= levels; l++)
        v = keys[l - 1] ? wrap(keys[l - 1], v) : wrap_array(v);
    return v;
}

/* Add the pin of model m to every term of nodeSelectorTerms terms (at
 * pointer p) that lacks it: terms are ORed, so the pin must hold in each. */
static gq_code pin_in_terms(rw *x, const gq_model *m, json_object *terms, gq_jptr *p)
{
    json_object *want = pin_expression(m);
    if (!want)
        return nomem(x);
    gq_code rc = GQ_OK;
    size_t at_terms = p->len;
    for (size_t i = 0; i < json_object_array_length(terms) && !rc; i++) {
        json_object *term = json_object_array_get_idx(terms, i);
        if (!json_object_is_type(term, json_type_object))
            continue;
        json_object *exprs = gq_json_member(term, "matchExpressions");
        gq_jptr_push_index(p, i);
        gq_jptr_push(p, "matchExpressions");
        if (!exprs) {
            rc = op_add(x, p, pin_at_level(m, 1));
        } else if (json_object_is_type(exprs, json_type_array)) {
            bool have = false;
            for (size_t j = 0; j < json_object_array_length(exprs) && !have; j++)
                have = gq_json_equal(json_object_array_get_idx(exprs, j), want);
            if (!have) {
                gq_jptr_push(p, "-");
                rc = op_add(x, p, pin_at_level(m, 0));
            }
        }
        gq_jptr_truncate(p, at_terms);
    }
    json_object_put(want);
    return rc;
}

static gq_code pin_model(rw *x)
{
    const gq_model *m = x->cost->model;
    json_object *ann = gq_json_member(x->meta, "annotations");
    if (x->opts && x->opts->model_deferred)
        return GQ_OK;
    if ((!gq_json_get_string(ann, GQ_ANN_GPU_MODEL) && !chosen_of(x)) || !m || m->n_products == 0)
        return GQ_OK;
    /* spec down to the terms; the first member missing is added whole */
    static const struct {
        const char *key;
        json_type type;
    } path[] = {{"affinity", json_type_object},
                {"nodeAffinity", json_type_object},
                {REQUIRED_TERMS, json_type_object},
                {"nodeSelectorTerms", json_type_array}};
    gq_jptr p;
    gq_jptr_init(&p);
    gq_jptr_push(&p, "spec");
    json_object *terms = x->spec;
    for (int i = 0; i < 4; i++) {
        gq_jptr_push(&p, path[i].key);
        if (!(terms = gq_json_get_typed(terms, path[i].key, path[i].type)))
            return op_add(x, &p, pin_at_level(m, 6 - i));
    }
    if (json_object_array_length(terms) == 0) {
        gq_jptr_push(&p, "-");
        return op_add(x, &p, pin_at_level(m, 2));
    }
    return pin_in_terms(x, m, terms, &p);
}

/* ---- schedulerName, label, annotations ------------------------------------- */

static gq_code set_scheduler(rw *x)
{
    const char *want = x->cfg->scheduler_name;
    if (!want || !want[0])
        return GQ_OK;
    const char *cur = gq_json_get_string(x->spec, "schedulerName");
    if (cur && cur[0] && strcmp(cur, DEFAULT_SCHEDULER) != 0)
        return GQ_OK; /* another scheduler was chosen on purpose */
    if (cur && !strcmp(cur, want))
        return GQ_OK;
    gq_jptr p;
    gq_jptr_init(&p);
    gq_jptr_push(&p, "spec");
    gq_jptr_push(&p, "schedulerName");
    return op_add(x, &p, json_object_new_string(want));
}

/* Make metadata[field] (metadata exists) hold every key of want (owned):
 * the whole map when absent, else only the members that differ. */
static gq_code merge_map(rw *x, const char *field, json_object *want)
{
    gq_code rc = GQ_OK;
    gq_jptr p;
    gq_jptr_init(&p);
    gq_jptr_push(&p, "metadata");
    gq_jptr_push(&p, field);
    json_object *cur = gq_json_get_typed(x->meta, field, json_type_object);
    if (!cur)
        return op_add(x, &p, want);
    size_t base = p.len;
    json_object_object_foreach(want, key, val)
    {
        const char *have = gq_json_get_string(cur, key);
        if (have && !strcmp(have, json_object_get_string(val)))
            continue;
        gq_jptr_push(&p, key);
        rc = op_add(x, &p, json_object_get(val));
        gq_jptr_truncate(&p, base);
        if (rc)
            break;
    }
    json_object_put(want);
    return rc;
}

static gq_code put_string(json_object *o, const char *key, const char *val)
{
    json_object *s = json_object_new_string(val);
    if (!s || json_object_object_add(o, key, s)) {
        json_object_put(s);
        return GQ_ENOMEM;
    }
    return GQ_OK;
}

/* gpuquota's records of what a GPU pod asked and is charged, into ann. */
static gq_code put_charge_records(rw *x, json_object *ann, json_object *originals,
                                  json_object *requests)
{
    const gq_pod_cost *cost = x->cost;
    char mem[GQ_QUANTITY_STR_MAX];
    gq_format_bytes(cost->gpu_memory, mem);
    snprintf(x->res->charged, sizeof(x->res->charged),
             "gpu-memory=%s,gpus=%" PRId64 ",gpu-pods=%" PRId64, mem, cost->gpus, cost->gpu_pods);
    if (json_object_object_length(requests) &&
        put_string(ann, GQ_ANN_REQUESTS, gq_json_compact(requests)))
        return GQ_ENOMEM;
    /* The first rewrite's record of the original request is history: a pod
     * gpuquota rewrote (reinvocation) keeps it. One its author wrote, or
     * copied from a rewritten pod, is replaced like every record of ours. */
    json_object *cur_ann = gq_json_member(x->meta, "annotations");
    bool keep = gq_pod_managed(x->pod) && gq_json_get_string(cur_ann, GQ_ANN_ORIGINAL) &&
                !gq_pod_user_set(x->pod, false, GQ_ANN_ORIGINAL);
    if (!keep && put_string(ann, GQ_ANN_ORIGINAL, gq_json_compact(originals)))
        return GQ_ENOMEM;
    if (put_string(ann, GQ_ANN_CHARGED, x->res->charged))
        return GQ_ENOMEM;
    /* The admission record the recount believes (quota/record.h). */
    gq_pod_facts facts;
    gq_pod_record rec;
    char rec_text[GQ_RECORD_MAX];
    bool terminating =
        gq_pod_facts_from_json(x->pod, "", &facts, NULL) == GQ_OK && facts.terminating;
    gq_pod_record_make(cost, gq_pod_model(cost), terminating, &rec);
    gq_pod_record_format(&rec, rec_text);
    return put_string(ann, GQ_ANN_ADMISSION, rec_text);
}

/* gpuquota's label and records on the pod: what a GPU pod is charged (not
 * for a pod whose DRA claims hold no GPU: the devices of its claims only,
 * so /validate sees them priced), the claims, the model chosen. */
static gq_code record(rw *x, json_object *originals, json_object *requests)
{
    gq_code rc = GQ_OK;
    json_object *labels = json_object_new_object(), *ann = json_object_new_object();
    if (!labels || !ann || put_string(labels, GQ_LABEL_MANAGED, "true") ||
        (x->cost->gpu_pods && put_charge_records(x, ann, originals, requests)))
        goto oom;
    json_object *cur_ann = gq_json_member(x->meta, "annotations");
    if (x->opts && x->opts->claims && put_string(ann, GQ_ANN_CLAIMS, x->opts->claims))
        goto oom;
    if (chosen_of(x) &&
        (put_string(ann, GQ_ANN_GPU_MODEL, chosen_of(x)->name) ||
         put_string(ann, GQ_ANN_GPU_MODEL_CHOICES, x->opts->choices ? x->opts->choices : "")))
        goto oom;
    if (!json_object_is_type(x->meta, json_type_object)) {
        /* No metadata at all: create it with both maps in one operation. */
        gq_jptr p;
        gq_jptr_init(&p);
        gq_jptr_push(&p, "metadata");
        json_object *meta = wrap("labels", labels);
        labels = NULL;
        if (meta && json_object_object_add(meta, "annotations", ann)) {
            json_object_put(meta);
            meta = NULL;
        }
        ann = NULL;
        return op_add(x, &p, meta);
    }
    rc = merge_map(x, "labels", labels);
    labels = NULL;
    if (!rc)
        rc = merge_map(x, "annotations", ann);
    ann = NULL;
    if (!rc && requests && !json_object_object_length(requests) &&
        gq_json_member(cur_ann, GQ_ANN_REQUESTS)) {
        /* No shared container: a gpu-requests the pod came with is not ours. */
        gq_jptr p;
        gq_jptr_init(&p);
        gq_jptr_push(&p, "metadata");
        gq_jptr_push(&p, "annotations");
        gq_jptr_push(&p, GQ_ANN_REQUESTS);
        rc = op_remove(x, &p);
    }
    return rc;
oom:
    json_object_put(labels);
    json_object_put(ann);
    return nomem(x);
}

/* The audit summary of a non-empty patch (gq_rewrite.changes). */
static gq_code summarise(rw *x, bool pinned, bool scheduled, json_object **out)
{
    size_t n = gq_patch_len(x->res->patch);
    *out = NULL;
    if (!n)
        return GQ_OK;
    json_object *o = json_object_new_object();
    if (!o)
        return nomem(x);
    bool bad = false;
    if (json_object_object_length(x->changed_ctrs)) {
        bad |= json_object_object_add(o, "containers", x->changed_ctrs) != 0;
        if (bad)
            json_object_put(x->changed_ctrs);
        x->changed_ctrs = NULL;
    }
    if (!bad && pinned)
        bad |= put_string(o, "gpuModel", x->cost->model->name) != GQ_OK;
    if (!bad && scheduled)
        bad |= put_string(o, "schedulerName", x->cfg->scheduler_name) != GQ_OK;
    json_object *ops = bad ? NULL : json_object_new_int64((int64_t)n);
    if (!ops || json_object_object_add(o, "operations", ops)) {
        json_object_put(ops);
        json_object_put(o);
        return nomem(x);
    }
    *out = o;
    return GQ_OK;
}

/* One GPU container c: its request as written into originals, a shared
 * slice's request as charged into requests, and its resources rewritten for
 * the backend. Whole GPUs stay as they are; without a model they are
 * charged as the largest one the pod may land on, and the user hears it. */
static gq_code rewrite_one(rw *x, const gq_ctr_cost *c, json_object *originals,
                           json_object *requests)
{
    const char *list;
    json_object *ctr = container_of(x->spec, c, &list);
    json_object *orig = original_of(ctr, c);
    if (!orig || json_object_object_add(originals, c->name, orig)) {
        json_object_put(orig);
        return nomem(x);
    }
    if (c->exclusive) {
        if (c->priced_as) {
            char each[GQ_QUANTITY_STR_MAX];
            gq_format_bytes(c->charged_per_gpu, each);
            warn(x,
                 "container %s: %" PRId64 " whole GPU(s) of unknown model charged as %s (%s "
                 "each); pin one with gpuquota.io/gpu-model",
                 c->name, c->gpus, c->priced_as->name, each);
        }
        return GQ_OK;
    }
    json_object *r = json_object_new_object();
    char mem[GQ_QUANTITY_STR_MAX];
    gq_format_bytes(c->charged_per_gpu, mem);
    json_object *g = r ? json_object_new_int64(c->gpus) : NULL;
    if (!g || json_object_object_add(r, "gpus", g)) {
        json_object_put(g);
        json_object_put(r);
        return nomem(x);
    }
    if (put_string(r, "memory", mem) || json_object_object_add(requests, c->name, r)) {
        json_object_put(r);
        return nomem(x);
    }
    if (c->form == GQ_FORM_BACKEND)
        return GQ_OK; /* already in a backend's resources */
    return rewrite_ctr(x, c, orig);
}

/* A GPU pod's rewrite: each container's resources, the model pin, the
 * scheduler, the records of what was asked and the summary of changes. */
static gq_code rewrite_gpu_pod(rw *x, json_object *originals, json_object *requests)
{
    gq_patch *patch = x->res->patch;
    gq_code rc;
    for (size_t i = 0; i < x->cost->n_ctrs; i++)
        if ((rc = rewrite_one(x, &x->cost->ctrs[i], originals, requests)))
            return rc;
    size_t before_pin = gq_patch_len(patch);
    if ((rc = pin_model(x)))
        return rc;
    bool pinned = gq_patch_len(patch) > before_pin;
    size_t before_sched = gq_patch_len(patch);
    if ((rc = set_scheduler(x)))
        return rc;
    bool scheduled = gq_patch_len(patch) > before_sched;
    if ((rc = record(x, originals, requests)))
        return rc;
    return summarise(x, pinned, scheduled, &x->res->changes);
}

gq_code gq_rewrite_pod(const gq_config *cfg, json_object *pod, const gq_pod_cost *cost,
                       const gq_rewrite_opts *opts, gq_rewrite *out, gq_err *err)
{
    gq_code rc = GQ_OK;
    /* Built on the stack (4 KB of warning text): a heap block this size
     * per admission would cost a malloc consolidation each time. */
    gq_rewrite built, *res = &built;
    json_object *originals = NULL, *requests = NULL;
    gq_rewrite_init(res);
    if (gq_patch_new(&res->patch))
        return gq_err_oom(err);
    rw x = {
        .cfg = cfg,
        .pod = pod,
        .spec = gq_json_member(pod, "spec"),
        .meta = gq_json_member(pod, "metadata"),
        .cost = cost,
        .opts = opts,
        .res = res,
        .err = err,
    };
    if (cost->gpu_pods == 0 && opts && opts->claims) {
        /* DRA claims that hold no GPU: their record alone. */
        if ((rc = record(&x, NULL, NULL)))
            goto out;
        goto done;
    }
    if (cost->gpu_pods == 0 || (cost->n_ctrs == 0 && !(opts && opts->claims)))
        goto done;
    originals = json_object_new_object();
    requests = json_object_new_object();
    x.changed_ctrs = json_object_new_object();
    if (!originals || !requests || !x.changed_ctrs) {
        rc = nomem(&x);
        goto out;
    }
    if ((rc = rewrite_gpu_pod(&x, originals, requests)))
        goto out;
    res->originals = originals;
    originals = NULL;
done:
    gq_rewrite_dispose(out);
    *out = *res;
    res = NULL;
out:
    json_object_put(x.changed_ctrs);
    json_object_put(originals);
    json_object_put(requests);
    if (res) {
        gq_patch_free(res->patch);
        json_object_put(res->changes);
    }
    return rc;
}
