/* DRA claim pricing (see dra.h). */
#include "quota/dra.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/json_member.h"
#include "quota/quantity.h"

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

/* A quoted literal without escapes at p: its body in *s, *n; the text after. */
static const char *quoted(const char *p, const char **s, size_t *n)
{
    char q = *p;
    if (q != '"' && q != '\'')
        return NULL;
    const char *end = strchr(p + 1, q);
    if (!end || memchr(p + 1, '\\', (size_t)(end - p - 1)))
        return NULL;
    *s = p + 1;
    *n = (size_t)(end - p - 1);
    return end + 1;
}

bool gq_dra_selector_product(const char *expr, const char **out, size_t *n_out)
{
    static const char head[] = "device.attributes[";
    static const char attr[] = "].productName";
    const char *p = skip_ws(expr), *dom, *val;
    size_t n_dom, n_val;
    if (strncmp(p, head, sizeof(head) - 1))
        return false;
    if (!(p = quoted(p + sizeof(head) - 1, &dom, &n_dom)) || !n_dom)
        return false;
    if (strncmp(p, attr, sizeof(attr) - 1))
        return false;
    p = skip_ws(p + sizeof(attr) - 1);
    if (strncmp(p, "==", 2))
        return false;
    if (!(p = quoted(skip_ws(p + 2), &val, &n_val)) || !n_val || *skip_ws(p))
        return false;
    *out = val;
    *n_out = n_val;
    return true;
}

/* The end of the string literal that starts at p (a quote), escapes
 * skipped; NULL when it does not end. */
static const char *literal_end(const char *p)
{
    char q = *p++;
    for (; *p && *p != q; p++)
        if (*p == '\\' && !*++p)
            return NULL;
    return *p ? p + 1 : NULL;
}

/* Whether [b, e) is exactly `device.driver == "NAME"` (either quote, spaces
 * around ==), inside any number of parentheses that enclose all of it. */
static bool driver_operand(const char *b, const char *e, const char **out, size_t *n_out)
{
    static const char head[] = "device.driver";
    for (;;) {
        while (b < e && isspace((unsigned char)*b))
            b++;
        while (e > b && isspace((unsigned char)e[-1]))
            e--;
        if (e - b < 2 || *b != '(' || e[-1] != ')')
            break;
        /* strip one pair only when it encloses the whole operand */
        int depth = 0;
        const char *p = b;
        for (; p < e; p++) {
            if (*p == '"' || *p == '\'') {
                if (!(p = literal_end(p)) || p > e)
                    return false;
                p--;
            } else if (*p == '(') {
                depth++;
            } else if (*p == ')' && --depth == 0) {
                break;
            }
        }
        if (p != e - 1)
            break;
        b++, e--;
    }
    const char *val, *end;
    size_t n_val;
    if ((size_t)(e - b) < sizeof(head) - 1 || strncmp(b, head, sizeof(head) - 1))
        return false;
    const char *q = skip_ws(b + sizeof(head) - 1);
    if (q >= e || strncmp(q, "==", 2) || !(end = quoted(skip_ws(q + 2), &val, &n_val)) || !n_val ||
        end > e || skip_ws(end) < e)
        return false;
    *out = val;
    *n_out = n_val;
    return true;
}

bool gq_dra_selector_driver(const char *expr, const char **out, size_t *n_out)
{
    /* A driver is pinned only when the expression is a conjunction (at its
     * top level: no ?:, no ||, which bind looser than &&) one of whose
     * operands is exactly the comparison; any other shape may be true for
     * other drivers ("(device.driver == 'x') == false"). */
    const char *p = expr, *start = expr;
    int depth = 0;
    bool found = false;
    for (;; p++) {
        if (*p == '"' || *p == '\'') {
            if (!(p = literal_end(p)))
                return false;
            p--;
            continue;
        }
        if (*p == '(' || *p == '[' || *p == '{') {
            depth++;
            continue;
        }
        if ((*p == ')' || *p == ']' || *p == '}') && --depth < 0)
            return false;
        if (depth == 0 && (*p == '?' || (p[0] == '|' && p[1] == '|')))
            return false;
        if (*p && !(depth == 0 && p[0] == '&' && p[1] == '&'))
            continue;
        if (!found)
            found = driver_operand(start, p, out, n_out);
        if (!*p)
            break;
        start = ++p + 1;
    }
    return depth == 0 && found;
}

/* The driver-pinning verdict of the selectors list sels (a class's or a
 * request's): GPU, OTHER or UNKNOWN as gq_device_class_kind says. */
static gq_class_kind selectors_kind(const gq_config *cfg, json_object *sels)
{
    gq_class_kind kind = GQ_CLASS_UNKNOWN;
    size_t n = json_object_is_type(sels, json_type_array) ? json_object_array_length(sels) : 0;
    for (size_t i = 0; i < n && i < GQ_DRA_MAX_SELECTORS; i++) {
        json_object *e =
            gq_json_member(gq_json_member(json_object_array_get_idx(sels, i), "cel"), "expression");
        const char *drv;
        size_t n_drv;
        if (!e || !json_object_is_type(e, json_type_string) ||
            json_object_get_string_len(e) > GQ_DRA_MAX_EXPRESSION ||
            !gq_dra_selector_driver(json_object_get_string(e), &drv, &n_drv))
            continue;
        if (gq_config_is_gpu_driver(cfg, drv, n_drv))
            return GQ_CLASS_GPU;
        kind = GQ_CLASS_OTHER;
    }
    return kind;
}

gq_class_kind gq_device_class_kind(const gq_config *cfg, json_object *dc)
{
    if (!dc)
        return GQ_CLASS_UNKNOWN;
    const char *name = gq_json_get_string(gq_json_member(dc, "metadata"), "name");
    if (name && gq_config_find_device_class(cfg, name))
        return GQ_CLASS_GPU;
    return selectors_kind(cfg, gq_json_member(gq_json_member(dc, "spec"), "selectors"));
}

static const gq_model *largest(const gq_config *cfg)
{
    const gq_model *best = NULL;
    for (size_t i = 0; i < cfg->n_models; i++)
        if (!best || cfg->models[i].memory > best->memory)
            best = &cfg->models[i];
    return best;
}

/* What gq_claim_spec_cost prices with. */
typedef struct dra_ctx {
    const gq_config *cfg;
    const gq_class_lookup *classes;
    const char *what;
} dra_ctx;

/* Whether request r's class (class_name, outside deviceClasses) holds
 * GPUs: false with *err set when gpuquota cannot tell. */
static gq_code class_holds_gpus(const dra_ctx *x, json_object *r, const char *class_name,
                                const char *rname, bool *gpus, gq_err *err)
{
    gq_class_kind k = x->classes && x->classes->kind ? x->classes->kind(x->classes->ctx, class_name)
                                                     : GQ_CLASS_UNKNOWN;
    if (k == GQ_CLASS_UNKNOWN)
        k = selectors_kind(x->cfg, gq_json_member(r, "selectors"));
    if (k == GQ_CLASS_UNKNOWN)
        return gq_err_set(err, GQ_EUNSUPPORTED,
                          "%s: request \"%.63s\" asks for devices of DeviceClass %.253s, and "
                          "gpuquota cannot tell whether they are GPUs (no selector of the class "
                          "pins a device.driver, or the class cannot be read); list the class in "
                          "deviceClasses if its devices are GPUs",
                          x->what, rname, class_name);
    *gpus = k == GQ_CLASS_GPU;
    return GQ_OK;
}

/* How many devices request r (of GPU class class_name) asks for: an
 * ExactCount, never All. */
static gq_code request_count(const dra_ctx *x, json_object *r, const char *rname,
                             const char *class_name, int64_t *count, gq_err *err)
{
    json_object *v;
    if ((v = gq_json_member(r, "allocationMode")) &&
        (!json_object_is_type(v, json_type_string) ||
         strcmp(json_object_get_string(v), "ExactCount"))) {
        if (json_object_is_type(v, json_type_string) && !strcmp(json_object_get_string(v), "All"))
            return gq_err_set(err, GQ_EUNSUPPORTED,
                              "%s: request \"%.63s\" asks for all devices of GPU class %s "
                              "(allocationMode All): gpuquota cannot know how many GPUs that is at "
                              "admission; ask for a count (allocationMode ExactCount)",
                              x->what, rname, class_name);
        return gq_err_set(err, GQ_EINVAL,
                          "%s: request \"%.63s\": allocationMode must be ExactCount "
                          "or All",
                          x->what, rname);
    }
    *count = 1;
    if ((v = gq_json_member(r, "count"))) {
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 1 ||
            json_object_get_int64(v) > GQ_DRA_MAX_COUNT)
            return gq_err_set(err, GQ_EINVAL, "%s: request \"%.63s\": count must be 1 to %d",
                              x->what, rname, GQ_DRA_MAX_COUNT);
        *count = json_object_get_int64(v);
    }
    return GQ_OK;
}

/* The GPU model request r's devices are: its class's, else the first
 * selector that pins a productName of a known model; NULL when none. */
static gq_code request_model(const dra_ctx *x, json_object *r, const char *rname,
                             const gq_device_class *dc, const gq_model **model, gq_err *err)
{
    const gq_model *m = dc && dc->model ? gq_config_find_model(x->cfg, dc->model) : NULL;
    json_object *sels = gq_json_member(r, "selectors");
    if (sels && !json_object_is_type(sels, json_type_array))
        return gq_err_set(err, GQ_EINVAL, "%s: request \"%.63s\": selectors must be a list",
                          x->what, rname);
    size_t n_sels = sels ? json_object_array_length(sels) : 0;
    if (n_sels > GQ_DRA_MAX_SELECTORS)
        return gq_err_set(err, GQ_ELIMIT, "%s: request \"%.63s\": more than %d selectors", x->what,
                          rname, GQ_DRA_MAX_SELECTORS);
    for (size_t i = 0; !m && i < n_sels; i++) {
        json_object *e =
            gq_json_member(gq_json_member(json_object_array_get_idx(sels, i), "cel"), "expression");
        const char *prod;
        size_t n_prod;
        char name[256];
        if (!e || !json_object_is_type(e, json_type_string) ||
            json_object_get_string_len(e) > GQ_DRA_MAX_EXPRESSION ||
            !gq_dra_selector_product(json_object_get_string(e), &prod, &n_prod) ||
            n_prod >= sizeof(name))
            continue;
        memcpy(name, prod, n_prod);
        name[n_prod] = '\0';
        m = gq_config_find_model(x->cfg, name);
    }
    *model = m;
    return GQ_OK;
}

/* The memory of one device of request r: capacity.requests.memory, else
 * all of model m's (the largest model's when m is NULL). */
static gq_code request_memory(const dra_ctx *x, json_object *r, const char *rname,
                              const gq_model *m, int64_t *per, gq_err *err)
{
    json_object *mem =
        gq_json_member(gq_json_member(gq_json_member(r, "capacity"), "requests"), "memory");
    if (!mem) {
        const gq_model *priced = m ? m : largest(x->cfg);
        *per = priced ? priced->memory : 0;
        return GQ_OK;
    }
    gq_quantity q;
    const char *s = json_object_is_type(mem, json_type_string) ? json_object_get_string(mem) : NULL;
    if (!s || gq_quantity_parse(s, strlen(s), &q, err) || gq_quantity_is_negative(&q) ||
        gq_quantity_to_int64_ceil(&q, per) || *per <= 0)
        return gq_err_set(err, GQ_EINVAL,
                          "%s: request \"%.63s\": capacity.requests.memory must be a positive "
                          "quantity",
                          x->what, rname);
    return GQ_OK;
}

/* One device request (exactly, or a firstAvailable alternative). */
static gq_code price_one(const dra_ctx *x, json_object *r, const char *rname, gq_claim_cost *out,
                         gq_err *err)
{
    json_object *cls = gq_json_member(r, "deviceClassName");
    memset(out, 0, sizeof(*out));
    if (!cls || !json_object_is_type(cls, json_type_string))
        return gq_err_set(err, GQ_EINVAL, "%s: request \"%.63s\": deviceClassName must be a string",
                          x->what, rname);
    const char *class_name = json_object_get_string(cls);
    const gq_device_class *dc = gq_config_find_device_class(x->cfg, class_name);
    gq_code rc;
    if (!dc) {
        bool gpus = false;
        rc = class_holds_gpus(x, r, class_name, rname, &gpus, err);
        if (rc || !gpus)
            return rc; /* not a GPU, or unpriced */
    }
    int64_t count = 1, per = 0;
    const gq_model *m = NULL;
    if ((rc = request_count(x, r, rname, class_name, &count, err)) ||
        (rc = request_model(x, r, rname, dc, &m, err)) ||
        (rc = request_memory(x, r, rname, m, &per, err)))
        return rc;
    out->gpus = count;
    if (__builtin_mul_overflow(per, count, &out->gpu_memory))
        return gq_err_set(err, GQ_ERANGE, "%s: request \"%.63s\": memory overflows", x->what,
                          rname);
    out->model = m;
    return GQ_OK;
}

static gq_code add(gq_claim_cost *acc, const gq_claim_cost *c, bool *first, const char *what,
                   gq_err *err)
{
    if (!c->gpus)
        return GQ_OK;
    if (__builtin_add_overflow(acc->gpus, c->gpus, &acc->gpus) ||
        __builtin_add_overflow(acc->gpu_memory, c->gpu_memory, &acc->gpu_memory))
        return gq_err_set(err, GQ_ERANGE, "%s: GPU devices overflow", what);
    acc->model = *first ? c->model : (acc->model == c->model ? acc->model : NULL);
    *first = false;
    return GQ_OK;
}

/* A request of firstAvailable alternatives fa. The scheduler picks one
 * alternative later, the first it can satisfy, which the author orders:
 * charge the most of each key any alternative asks (devices and memory
 * apart), never one alternative's whole price, which another may pass on
 * either key. */
static gq_code price_first_available(const dra_ctx *x, json_object *fa, const char *rname,
                                     gq_claim_cost *c, gq_err *err)
{
    size_t m = json_object_array_length(fa);
    if (m > GQ_DRA_MAX_SUBREQUESTS)
        return gq_err_set(err, GQ_ELIMIT, "%s: request \"%.63s\": more than %d alternatives",
                          x->what, rname, GQ_DRA_MAX_SUBREQUESTS);
    memset(c, 0, sizeof(*c));
    bool any = false, same = true;
    const gq_model *model = NULL;
    for (size_t j = 0; j < m; j++) {
        gq_claim_cost s;
        gq_code rc = price_one(x, json_object_array_get_idx(fa, j), rname, &s, err);
        if (rc)
            return rc;
        if (!s.gpus)
            continue;
        same = same && (!any || s.model == model);
        model = s.model;
        any = true;
        c->gpus = s.gpus > c->gpus ? s.gpus : c->gpus;
        c->gpu_memory = s.gpu_memory > c->gpu_memory ? s.gpu_memory : c->gpu_memory;
    }
    c->model = same ? model : NULL;
    return GQ_OK;
}

gq_code gq_claim_spec_cost(const gq_config *cfg, json_object *spec, const gq_class_lookup *classes,
                           const char *what, gq_claim_cost *out, gq_err *err)
{
    dra_ctx x = {cfg, classes, what};
    gq_claim_cost acc = {0, 0, NULL};
    bool first = true;
    json_object *reqs = gq_json_member(gq_json_member(spec, "devices"), "requests");
    if (!spec || !json_object_is_type(spec, json_type_object))
        return gq_err_set(err, GQ_EINVAL, "%s: spec must be an object", what);
    if (reqs && !json_object_is_type(reqs, json_type_array))
        return gq_err_set(err, GQ_EINVAL, "%s: spec.devices.requests must be a list", what);
    size_t n = reqs ? json_object_array_length(reqs) : 0;
    if (n > GQ_DRA_MAX_REQUESTS)
        return gq_err_set(err, GQ_ELIMIT, "%s: more than %d device requests", what,
                          GQ_DRA_MAX_REQUESTS);
    for (size_t i = 0; i < n; i++) {
        json_object *r = json_object_array_get_idx(reqs, i), *nm = gq_json_member(r, "name");
        const char *rname =
            nm && json_object_is_type(nm, json_type_string) ? json_object_get_string(nm) : "";
        json_object *ex = gq_json_member(r, "exactly"), *fa = gq_json_member(r, "firstAvailable");
        gq_claim_cost c;
        gq_code rc;
        if (ex)
            rc = price_one(&x, ex, rname, &c, err);
        else if (fa && json_object_is_type(fa, json_type_array))
            rc = price_first_available(&x, fa, rname, &c, err);
        else /* also the pre-v1 shape, the device class on the request itself */
            rc = price_one(&x, r, rname, &c, err);
        if (rc || (rc = add(&acc, &c, &first, what, err)))
            return rc;
    }
    *out = acc;
    return GQ_OK;
}
