/* YAML configuration file: parsing (libyaml) and rendering.
 *
 * Parsing runs twice over the (capped) input: an event pass rejects what the
 * schema never needs and what makes YAML dangerous (aliases and anchors, the
 * "billion laughs" expansion; tags; deep nesting; several documents), then
 * the document pass walks the node tree, so every message can cite the line
 * of the node it is about. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "common/buf.h"
#include "quota/catalog.h"
#include "quota/config.h"
#include "quota/quantity.h"

#define CONFIG_MAX_INPUT ((size_t)1 << 20)
#define MAX_DEPTH 8 /* the schema needs 4: root > models > model > products */
#define MAX_MODELS 256
#define MAX_PRODUCTS 64
#define MAX_MIG 32
#define MAX_NAMESPACES 1024
#define MAX_PATH_LEN 4096
#define MAX_DEVICE_CLASSES 64
#define DNS_LABEL_MAX 63
#define DNS_SUBDOMAIN_MAX 253
#define LABEL_VALUE_MAX 63

typedef struct pctx {
    yaml_document_t *doc;
    const char *file;
    gq_err *err;
} pctx;

static gq_code at_line(gq_err *err, const char *file, size_t line, gq_code code, const char *fmt,
                       va_list ap) GQ_PRINTF(5, 0);

static gq_code at_line(gq_err *err, const char *file, size_t line, gq_code code, const char *fmt,
                       va_list ap)
{
    char msg[GQ_ERR_MSG_MAX];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    return gq_err_set(err, code, "%.200s:%zu: %s", file, line, msg);
}

/* Record "file:line: message" for node n (line 1 when n is NULL). */
static gq_code perr(pctx *c, const yaml_node_t *n, gq_code code, const char *fmt, ...)
    GQ_PRINTF(4, 5);

static gq_code perr(pctx *c, const yaml_node_t *n, gq_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gq_code rc = at_line(c->err, c->file, n ? n->start_mark.line + 1 : 1, code, fmt, ap);
    va_end(ap);
    return rc;
}

static gq_code perr_line(gq_err *err, const char *file, size_t line, gq_code code, const char *fmt,
                         ...) GQ_PRINTF(5, 6);

static gq_code perr_line(gq_err *err, const char *file, size_t line, gq_code code, const char *fmt,
                         ...)
{
    va_list ap;
    va_start(ap, fmt);
    gq_code rc = at_line(err, file, line, code, fmt, ap);
    va_end(ap);
    return rc;
}

static gq_code oom(pctx *c)
{
    return gq_err_set(c->err, GQ_ENOMEM, "%.200s: out of memory", c->file);
}

/* ---- scalars ---------------------------------------------------------- */

static const char *kind_name(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_SCALAR_NODE:
        return "a scalar";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_MAPPING_NODE:
        return "a mapping";
    default:
        return "nothing";
    }
}

static bool is_plain(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static const char *sval(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

/* YAML 1.2 core schema null: an empty plain scalar, ~, null. */
static bool is_null(const yaml_node_t *n)
{
    if (!is_plain(n))
        return false;
    const char *v = sval(n);
    return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

/* A scalar's text; what names the field in messages. */
static gq_code get_scalar(pctx *c, const yaml_node_t *n, const char *what, const char **out)
{
    if (n->type != YAML_SCALAR_NODE)
        return perr(c, n, GQ_EINVAL, "%s: expected a string, got %s", what, kind_name(n));
    if (strlen(sval(n)) != n->data.scalar.length)
        return perr(c, n, GQ_EINVAL, "%s: contains a NUL character", what);
    *out = sval(n);
    return GQ_OK;
}

/* A string field where null and "" both mean "none": *out is NULL then. */
static gq_code get_opt_string(pctx *c, const yaml_node_t *n, const char *what, char **out)
{
    const char *v = NULL;
    if (is_null(n)) {
        *out = NULL;
        return GQ_OK;
    }
    gq_code rc = get_scalar(c, n, what, &v);
    if (rc)
        return rc;
    if (!*v) {
        *out = NULL;
        return GQ_OK;
    }
    if (!(*out = strdup(v)))
        return oom(c);
    return GQ_OK;
}

static gq_code get_bool(pctx *c, const yaml_node_t *n, const char *what, bool *out)
{
    static const char *const yes[] = {"true", "True", "TRUE"};
    static const char *const no[] = {"false", "False", "FALSE"};
    if (is_plain(n)) {
        for (size_t i = 0; i < 3; i++) {
            if (!strcmp(sval(n), yes[i])) {
                *out = true;
                return GQ_OK;
            }
            if (!strcmp(sval(n), no[i])) {
                *out = false;
                return GQ_OK;
            }
        }
    }
    if (n->type != YAML_SCALAR_NODE)
        return perr(c, n, GQ_EINVAL, "%s: expected true or false, got %s", what, kind_name(n));
    return perr(c, n, GQ_EINVAL, "%s: expected true or false (unquoted), got \"%.64s\"", what,
                sval(n));
}

static gq_code get_int(pctx *c, const yaml_node_t *n, const char *what, int min, int max, int *out)
{
    if (n->type != YAML_SCALAR_NODE)
        return perr(c, n, GQ_EINVAL, "%s: expected an integer, got %s", what, kind_name(n));
    const char *v = sval(n), *p = v;
    bool neg = false;
    if (*p == '-' || *p == '+')
        neg = *p++ == '-';
    long long x = 0;
    size_t digits = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (++digits > 12)
            return perr(c, n, GQ_ERANGE, "%s: %.64s is out of range %d..%d", what, v, min, max);
        x = x * 10 + (*p - '0');
    }
    if (!is_plain(n) || !digits || *p)
        return perr(c, n, GQ_EINVAL, "%s: expected an integer, got \"%.64s\"", what, v);
    if (neg)
        x = -x;
    if (x < min || x > max)
        return perr(c, n, GQ_ERANGE, "%s: %.64s is out of range %d..%d", what, v, min, max);
    *out = (int)x;
    return GQ_OK;
}

/* A Kubernetes quantity of whole bytes, >= 0 (or > 0 when !allow_zero). */
static gq_code get_bytes(pctx *c, const yaml_node_t *n, const char *what, bool allow_zero,
                         int64_t *out)
{
    const char *v = NULL;
    gq_quantity q;
    gq_err qerr = {0};
    int64_t bytes;
    gq_code rc = get_scalar(c, n, what, &v);
    if (rc)
        return rc;
    rc = gq_quantity_parse(v, n->data.scalar.length, &q, &qerr);
    if (rc)
        return perr(c, n, rc, "%s: %s", what, qerr.msg);
    if (gq_quantity_is_negative(&q) || (!allow_zero && gq_quantity_is_zero(&q)))
        return perr(c, n, GQ_ERANGE, "%s: %.64s must be %s", what, v,
                    allow_zero ? "zero or more" : "greater than zero");
    if (!gq_quantity_is_integer(&q))
        return perr(c, n, GQ_EINVAL, "%s: %.64s is not a whole number of bytes", what, v);
    rc = gq_quantity_to_int64_ceil(&q, &bytes);
    if (rc)
        return perr(c, n, rc, "%s: %.64s is too large", what, v);
    *out = bytes;
    return GQ_OK;
}

/* ---- name syntax (Kubernetes validation rules) ------------------------ */

static bool is_lower_alnum(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
}

static bool is_alnum(char ch)
{
    return is_lower_alnum(ch) || (ch >= 'A' && ch <= 'Z');
}

/* Kubernetes name syntax: 1..max characters, alphanumeric (edge) at both
 * ends, inner characters alphanumeric or in punct; in dotted names each dot
 * must sit between alphanumerics (RFC 1123 subdomain). */
static bool name_syntax_ok(const char *s, size_t max, bool (*edge)(char), const char *punct,
                           bool dotted)
{
    size_t n = strlen(s);
    if (!n || n > max || !edge(s[0]) || !edge(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!edge(s[i]) && !strchr(punct, s[i]))
            return false;
        if (dotted && s[i] == '.' && (!edge(s[i - 1]) || !edge(s[i + 1])))
            return false;
    }
    return true;
}

/* RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63. */
static bool is_dns_label(const char *s)
{
    return name_syntax_ok(s, DNS_LABEL_MAX, is_lower_alnum, "-", false);
}

/* RFC 1123 subdomain: dot-separated labels, at most 253. */
static bool is_dns_subdomain(const char *s)
{
    return name_syntax_ok(s, DNS_SUBDOMAIN_MAX, is_lower_alnum, "-.", true);
}

/* Label value: (([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?, at most 63;
 * empty is excluded because a product string must name something. */
static bool is_label_value(const char *s)
{
    return name_syntax_ok(s, LABEL_VALUE_MAX, is_alnum, "-_.", false);
}

/* ---- mappings and lists ----------------------------------------------- */

/* Walk a mapping's keys against a fixed key list: each key must be a scalar,
 * known and unique. Calls fn(ctx, key index, value node) in document order. */
typedef gq_code (*field_fn)(pctx *c, void *obj, size_t key, yaml_node_t *value);

static gq_code walk_mapping(pctx *c, yaml_node_t *n, const char *what, const char *const *keys,
                            size_t n_keys, field_fn fn, void *obj)
{
    if (n->type != YAML_MAPPING_NODE)
        return perr(c, n, GQ_EINVAL, "%s: expected a mapping, got %s", what, kind_name(n));
    uint32_t seen = 0;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        if (k->type != YAML_SCALAR_NODE)
            return perr(c, k, GQ_EINVAL, "%s: keys must be strings, got %s", what, kind_name(k));
        size_t i = 0;
        while (i < n_keys && strcmp(sval(k), keys[i]) != 0)
            i++;
        if (i == n_keys) {
            char valid[256] = "";
            size_t len = 0;
            for (size_t j = 0; j < n_keys && len < sizeof(valid); j++)
                len += (size_t)snprintf(valid + len, sizeof(valid) - len, "%s%s", j ? ", " : "",
                                        keys[j]);
            return perr(c, k, GQ_EINVAL, "%s: unknown key \"%.64s\" (valid keys: %s)", what,
                        sval(k), valid);
        }
        if (seen & (1u << i))
            return perr(c, k, GQ_EINVAL, "%s: duplicate key \"%s\"", what, keys[i]);
        seen |= 1u << i;
        gq_code rc = fn(c, obj, i, v);
        if (rc)
            return rc;
    }
    return GQ_OK;
}

static size_t seq_len(const yaml_node_t *n)
{
    return (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
}

static yaml_node_t *seq_item(pctx *c, const yaml_node_t *n, size_t i)
{
    return yaml_document_get_node(c->doc, n->data.sequence.items.start[i]);
}

/* A list node (null = empty) of at most max items; *count is its length. */
static gq_code get_list(pctx *c, const yaml_node_t *n, const char *what, size_t max, size_t *count)
{
    if (is_null(n)) {
        *count = 0;
        return GQ_OK;
    }
    if (n->type != YAML_SEQUENCE_NODE)
        return perr(c, n, GQ_EINVAL, "%s: expected a list, got %s", what, kind_name(n));
    if (seq_len(n) > max)
        return perr(c, n, GQ_ELIMIT, "%s: more than %zu entries", what, max);
    *count = seq_len(n);
    return GQ_OK;
}

/* What the strings of a list are: the field they are in, how many may be
 * given, and the check each passes, described for the error. */
typedef struct str_list_rule {
    const char *what;
    size_t max;
    bool (*check)(const char *);
    const char *rule;
} str_list_rule;

/* A list of unique strings, each passing r->check. The result replaces
 * *items / *n_items only on success. */
static gq_code get_string_list(pctx *c, const yaml_node_t *n, const str_list_rule *r, char ***items,
                               size_t *n_items)
{
    const char *what = r->what;
    size_t count = 0, got = 0;
    char **v = NULL;
    gq_code rc = get_list(c, n, what, r->max, &count);
    if (rc)
        return rc;
    if (count && !(v = calloc(count, sizeof(*v))))
        return oom(c);
    for (; got < count; got++) {
        yaml_node_t *item = seq_item(c, n, got);
        const char *s = NULL;
        rc = get_scalar(c, item, what, &s);
        if (rc)
            goto out;
        if (!r->check(s)) {
            rc = perr(c, item, GQ_EINVAL, "%s: \"%.64s\" is not %s", what, s, r->rule);
            goto out;
        }
        for (size_t j = 0; j < got; j++) {
            if (!strcmp(v[j], s)) {
                rc = perr(c, item, GQ_EINVAL, "%s: \"%.64s\" is listed twice", what, s);
                goto out;
            }
        }
        if (!(v[got] = strdup(s))) {
            rc = oom(c);
            goto out;
        }
    }
    for (size_t i = 0; i < *n_items; i++)
        free((*items)[i]);
    free(*items);
    *items = v;
    *n_items = count;
    v = NULL;
out:
    if (v) {
        for (size_t i = 0; i < got; i++)
            free(v[i]);
        free(v);
    }
    return rc;
}

/* ---- models ----------------------------------------------------------- */

static const char *const model_keys[] = {"name", "memory", "products", "migProfiles"};
enum { MK_NAME, MK_MEMORY, MK_PRODUCTS, MK_MIG };

/* A model from the file plus the nodes later checks cite. */
typedef struct file_model {
    gq_model m;
    yaml_node_t *node, *name_node, *memory_node, *products_node, *mig_node;
} file_model;

static gq_code model_field(pctx *c, void *obj, size_t key, yaml_node_t *v)
{
    file_model *fm = obj;
    gq_code rc = GQ_OK;
    switch (key) {
    case MK_NAME: {
        const char *s = NULL;
        rc = get_scalar(c, v, "models[].name", &s);
        if (rc)
            return rc;
        if (!is_dns_label(s))
            return perr(c, v, GQ_EINVAL,
                        "models[].name: \"%.64s\" is not a lower-case DNS label "
                        "(a-z, 0-9 and '-', at most 63 characters)",
                        s);
        if (!(fm->m.name = strdup(s)))
            return oom(c);
        fm->name_node = v;
        break;
    }
    case MK_MEMORY:
        fm->memory_node = v;
        return get_bytes(c, v, "models[].memory", false, &fm->m.memory);
    case MK_PRODUCTS: {
        static const str_list_rule products = {
            "models[].products", MAX_PRODUCTS, is_label_value,
            "a valid label value (what nvidia.com/gpu.product holds)"};
        fm->products_node = v;
        return get_string_list(c, v, &products, &fm->m.products, &fm->m.n_products);
    }
    case MK_MIG:
        fm->mig_node = v;
        break; /* read once memory is known, in parse_model */
    }
    return rc;
}

static gq_code parse_mig(pctx *c, file_model *fm)
{
    size_t count = 0;
    gq_code rc = get_list(c, fm->mig_node, "models[].migProfiles", MAX_MIG, &count);
    if (rc || !count)
        return rc;
    if (!(fm->m.mig = calloc(count, sizeof(*fm->m.mig))))
        return oom(c);
    for (size_t i = 0; i < count; i++) {
        yaml_node_t *item = seq_item(c, fm->mig_node, i);
        gq_mig_profile *p = &fm->m.mig[i];
        const char *s = NULL;
        gq_err merr = {0};
        rc = get_scalar(c, item, "models[].migProfiles", &s);
        if (rc)
            return rc;
        rc = gq_mig_profile_parse(s, &p->slices, &p->memory, &merr);
        if (rc)
            return perr(c, item, rc, "models[].migProfiles: %s", merr.msg);
        if (p->memory > fm->m.memory)
            return perr(c, item, GQ_EINVAL,
                        "models[].migProfiles: \"%.64s\" holds more memory than the model's %s", s,
                        sval(fm->memory_node));
        for (size_t j = 0; j < i; j++)
            if (!strcmp(fm->m.mig[j].name, s))
                return perr(c, item, GQ_EINVAL, "models[].migProfiles: \"%.64s\" is listed twice",
                            s);
        if (!(p->name = strdup(s)))
            return oom(c);
        fm->m.n_mig++;
    }
    gq_mig_sort(fm->m.mig, fm->m.n_mig);
    return GQ_OK;
}

static gq_code parse_model(pctx *c, yaml_node_t *n, file_model *fm)
{
    fm->node = n;
    gq_code rc = walk_mapping(c, n, "models[]", model_keys, 4, model_field, fm);
    if (rc)
        return rc;
    if (!fm->name_node)
        return perr(c, n, GQ_EINVAL, "models[]: missing required key \"name\"");
    if (!fm->memory_node)
        return perr(c, n, GQ_EINVAL, "models[] \"%s\": missing required key \"memory\"",
                    fm->m.name);
    if (fm->mig_node)
        return parse_mig(c, fm);
    return GQ_OK;
}

static ssize_t model_index(const gq_model *models, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcasecmp(models[i].name, name))
            return (ssize_t)i;
    return -1;
}

/* One claim of a product string by a model; order puts built-ins first,
 * then the file's products in document order. */
typedef struct claim {
    const char *product, *owner;
    size_t order;
    const yaml_node_t *node; /* NULL for a built-in */
} claim;

static int claim_cmp(const void *a, const void *b)
{
    const claim *x = a, *y = b;
    int d = strcmp(x->product, y->product);
    if (d)
        return d;
    return x->order < y->order ? -1 : x->order > y->order;
}

static bool replaced_by_file(const gq_model *m, const file_model *fms, size_t n_fm)
{
    for (size_t f = 0; f < n_fm; f++)
        if (!strcasecmp(fms[f].m.name, m->name))
            return true;
    return false;
}

/* Every product string may belong to one model only. Sorting the claims
 * keeps this O(n log n) for the largest file the caps allow; the clash
 * reported is the earliest later claim in the file, naming the first owner
 * (built-ins count as earlier than the file). */
static gq_code check_product_claims(pctx *c, const gq_config *cfg, const file_model *fms,
                                    size_t n_fm)
{
    size_t n = 0, at = 0;
    const claim *worst = NULL, *worst_owner = NULL;
    for (size_t k = 0; k < cfg->n_models; k++)
        n += cfg->models[k].n_products;
    for (size_t i = 0; i < n_fm; i++)
        n += fms[i].m.n_products;
    if (!n)
        return GQ_OK;
    claim *v = calloc(n, sizeof(*v));
    if (!v)
        return oom(c);
    for (size_t k = 0; k < cfg->n_models; k++) {
        const gq_model *m = &cfg->models[k];
        if (replaced_by_file(m, fms, n_fm))
            continue;
        for (size_t p = 0; p < m->n_products; p++, at++)
            v[at] = (claim){m->products[p], m->name, at, NULL};
    }
    for (size_t i = 0; i < n_fm; i++)
        for (size_t p = 0; p < fms[i].m.n_products; p++, at++)
            v[at] = (claim){fms[i].m.products[p], fms[i].m.name, at,
                            seq_item(c, fms[i].products_node, p)};
    qsort(v, at, sizeof(*v), claim_cmp);
    for (size_t i = 1, first = 0; i < at; i++) {
        if (strcmp(v[i].product, v[first].product) != 0) {
            first = i;
            continue;
        }
        if (!worst || v[i].order < worst->order) {
            worst = &v[i];
            worst_owner = &v[first];
        }
    }
    gq_code rc = GQ_OK;
    if (worst)
        rc = perr(c, worst->node, GQ_EINVAL,
                  "models[].products: \"%.64s\" is already claimed by model \"%s\"", worst->product,
                  worst_owner->owner);
    free(v);
    return rc;
}

/* Merge file models into cfg->models: same name replaces, new names append.
 * Validation comes first, so failure leaves cfg intact. */
static gq_code merge_models(pctx *c, gq_config *cfg, file_model *fms, size_t n_fm)
{
    size_t n_total = cfg->n_models;
    for (size_t i = 0; i < n_fm; i++)
        if (model_index(cfg->models, cfg->n_models, fms[i].m.name) < 0)
            n_total++;
    gq_code rc = check_product_claims(c, cfg, fms, n_fm);
    if (rc)
        return rc;
    if (n_total > cfg->n_models) {
        gq_model *grown = realloc(cfg->models, n_total * sizeof(*grown));
        if (!grown)
            return oom(c);
        cfg->models = grown;
    }
    for (size_t i = 0; i < n_fm; i++) {
        ssize_t at = model_index(cfg->models, cfg->n_models, fms[i].m.name);
        if (at >= 0)
            gq_model_dispose(&cfg->models[at]);
        else
            at = (ssize_t)cfg->n_models++;
        cfg->models[at] = fms[i].m;
        memset(&fms[i].m, 0, sizeof(fms[i].m));
    }
    return GQ_OK;
}

static gq_code parse_models(pctx *c, gq_config *cfg, const yaml_node_t *n)
{
    size_t count = 0, i = 0;
    file_model *fms = NULL;
    gq_code rc = get_list(c, n, "models", MAX_MODELS, &count);
    if (rc || !count)
        return rc;
    if (!(fms = calloc(count, sizeof(*fms))))
        return oom(c);
    for (; i < count; i++) {
        rc = parse_model(c, seq_item(c, n, i), &fms[i]);
        if (rc) {
            i++; /* dispose the partly parsed one too */
            goto out;
        }
        for (size_t j = 0; j < i; j++) {
            if (!strcmp(fms[j].m.name, fms[i].m.name)) {
                rc = perr(c, fms[i].name_node, GQ_EINVAL,
                          "models[].name: \"%s\" is defined twice (first at line %zu)",
                          fms[i].m.name, (size_t)fms[j].name_node->start_mark.line + 1);
                i++;
                goto out;
            }
        }
    }
    rc = merge_models(c, cfg, fms, count);
out:
    for (size_t j = 0; j < i; j++)
        gq_model_dispose(&fms[j].m);
    free(fms);
    return rc;
}

/* ---- top level -------------------------------------------------------- */

static const char *const audit_keys[] = {"path", "maxSize", "maxFiles"};
enum { AK_PATH, AK_MAX_SIZE, AK_MAX_FILES };

static gq_code audit_field(pctx *c, void *obj, size_t key, yaml_node_t *v)
{
    gq_audit_config *a = obj;
    switch (key) {
    case AK_PATH: {
        char *path = NULL;
        gq_code rc = get_opt_string(c, v, "audit.path", &path);
        if (rc)
            return rc;
        if (path && strlen(path) > MAX_PATH_LEN) {
            free(path);
            return perr(c, v, GQ_ELIMIT, "audit.path: longer than %d bytes", MAX_PATH_LEN);
        }
        free(a->path);
        a->path = path;
        return GQ_OK;
    }
    case AK_MAX_SIZE:
        return get_bytes(c, v, "audit.maxSize", true, &a->max_size);
    case AK_MAX_FILES:
        return get_int(c, v, "audit.maxFiles", 0, 1000, &a->max_files);
    }
    return GQ_OK;
}

/* ---- deviceClasses ------------------------------------------------------ */

static const char *const dc_keys[] = {"name", "model"};

typedef struct file_dc {
    gq_device_class d;
    yaml_node_t *name_node, *model_node;
} file_dc;

static gq_code dc_field(pctx *c, void *obj, size_t key, yaml_node_t *v)
{
    file_dc *f = obj;
    if (key == 1) {
        f->model_node = v;
        return GQ_OK;
    }
    f->name_node = v;
    gq_code rc = get_opt_string(c, v, "deviceClasses[].name", &f->d.name);
    if (!rc && f->d.name && !is_dns_subdomain(f->d.name))
        rc = perr(c, v, GQ_EINVAL,
                  "deviceClasses[].name: \"%.64s\" is not a DeviceClass name (lower-case DNS "
                  "subdomain)",
                  f->d.name);
    return rc;
}

/* The model of device class f, if it names one: a model of cfg. */
static gq_code dc_model(pctx *c, const gq_config *cfg, file_dc *f)
{
    char *model = NULL;
    gq_code rc = GQ_OK;
    if (f->model_node && (rc = get_opt_string(c, f->model_node, "deviceClasses[].model", &model)))
        return rc;
    if (!model)
        return GQ_OK;
    ssize_t at = model_index(cfg->models, cfg->n_models, model);
    if (at < 0)
        rc = perr(c, f->model_node, GQ_EINVAL,
                  "deviceClasses[] \"%s\": model \"%.64s\" is not a model name", f->d.name, model);
    else if (!(f->d.model = strdup(cfg->models[at].name)))
        rc = oom(c);
    free(model);
    return rc;
}

/* Device class item, fs[i]: a name none of fs[0..i) has, and its model. */
static gq_code read_device_class(pctx *c, const gq_config *cfg, yaml_node_t *item, file_dc *fs,
                                 size_t i)
{
    file_dc *f = &fs[i];
    gq_code rc = walk_mapping(c, item, "deviceClasses[]", dc_keys, 2, dc_field, f);
    if (rc)
        return rc;
    if (!f->d.name)
        return perr(c, item, GQ_EINVAL, "deviceClasses[]: missing required key \"name\"");
    for (size_t j = 0; j < i; j++)
        if (!strcmp(fs[j].d.name, f->d.name))
            return perr(c, f->name_node, GQ_EINVAL,
                        "deviceClasses[].name: \"%s\" is listed twice (first at line %zu)",
                        f->d.name, (size_t)fs[j].name_node->start_mark.line + 1);
    return dc_model(c, cfg, f);
}

/* deviceClasses: the DRA DeviceClasses whose devices are GPUs, each with the
 * catalog model they are (optional). Replaces the default list. Resolved
 * after models, which it may name. */
static gq_code parse_device_classes(pctx *c, gq_config *cfg, const yaml_node_t *n)
{
    size_t count = 0, i = 0;
    file_dc *fs = NULL;
    gq_device_class *out = NULL;
    gq_code rc = get_list(c, n, "deviceClasses", MAX_DEVICE_CLASSES, &count);
    if (rc)
        return rc;
    if (count && (!(fs = calloc(count, sizeof(*fs))) || !(out = calloc(count, sizeof(*out))))) {
        rc = oom(c);
        goto out;
    }
    for (; i < count; i++)
        if ((rc = read_device_class(c, cfg, seq_item(c, n, i), fs, i)))
            goto out;
    for (size_t j = 0; j < cfg->n_device_classes; j++) {
        free(cfg->device_classes[j].name);
        free(cfg->device_classes[j].model);
    }
    free(cfg->device_classes);
    for (size_t j = 0; j < count; j++)
        out[j] = fs[j].d;
    cfg->device_classes = out;
    cfg->n_device_classes = count;
    out = NULL;
    free(fs); /* its strings are cfg's now */
    return GQ_OK;
out:
    for (size_t j = 0; fs && j < count && j <= i; j++) {
        free(fs[j].d.name);
        free(fs[j].d.model);
    }
    free(fs);
    free(out);
    return rc;
}

/* ---- top level, continued ------------------------------------------------- */

static const char *const top_keys[] = {
    "backend", "memoryUnit", "schedulerName", "defaultModel", "requireQuota", "exemptNamespaces",
    "audit",   "models",     "deviceClasses", "gpuDrivers",   "maxQueuedPods"};
enum {
    TK_BACKEND,
    TK_UNIT,
    TK_SCHED,
    TK_DEFMODEL,
    TK_REQUIRE,
    TK_EXEMPT,
    TK_AUDIT,
    TK_MODELS,
    TK_DEVCLASSES,
    TK_GPU_DRIVERS,
    TK_MAX_QUEUED
};

/* Top-level state: defaultModel, models and deviceClasses are resolved
 * after the walk, as defaultModel and deviceClasses may name a model the
 * file defines further down. */
typedef struct top {
    gq_config *cfg;
    yaml_node_t *default_model, *models, *device_classes;
} top;

static const str_list_rule exempt_rule = {"exemptNamespaces", MAX_NAMESPACES, is_dns_label,
                                          "a valid namespace name"};
/* A DRA driver name is a DNS subdomain (resource.k8s.io validation). */
static const str_list_rule drivers_rule = {"gpuDrivers", MAX_DEVICE_CLASSES, is_dns_subdomain,
                                           "a DRA driver name (a lower-case DNS subdomain)"};

static gq_code parse_backend(pctx *c, gq_config *cfg, const yaml_node_t *v)
{
    const char *s = NULL;
    gq_code rc = get_scalar(c, v, "backend", &s);
    if (rc)
        return rc;
    if (gq_backend_parse(s, &cfg->backend))
        return perr(c, v, GQ_EINVAL,
                    "backend: unknown backend \"%.64s\" (valid: aliyun, hami, volcano, mig, "
                    "timeslicing)",
                    s);
    return GQ_OK;
}

static gq_code parse_scheduler_name(pctx *c, gq_config *cfg, const yaml_node_t *v)
{
    char *name = NULL;
    gq_code rc = get_opt_string(c, v, "schedulerName", &name);
    if (rc)
        return rc;
    if (name && !is_dns_subdomain(name)) {
        rc = perr(c, v, GQ_EINVAL,
                  "schedulerName: \"%.64s\" is not a valid scheduler name "
                  "(lower-case DNS subdomain)",
                  name);
        free(name);
        return rc;
    }
    free(cfg->scheduler_name);
    cfg->scheduler_name = name;
    return GQ_OK;
}

static gq_code top_field(pctx *c, void *obj, size_t key, yaml_node_t *v)
{
    top *t = obj;
    gq_config *cfg = t->cfg;
    switch (key) {
    case TK_BACKEND:
        return parse_backend(c, cfg, v);
    case TK_UNIT:
        return get_bytes(c, v, "memoryUnit", false, &cfg->memory_unit);
    case TK_SCHED:
        return parse_scheduler_name(c, cfg, v);
    case TK_DEFMODEL:
        t->default_model = v;
        return GQ_OK;
    case TK_REQUIRE:
        return get_bool(c, v, "requireQuota", &cfg->require_quota);
    case TK_MAX_QUEUED:
        return get_int(c, v, "maxQueuedPods", 1, 1000000, &cfg->max_queued_pods);
    case TK_EXEMPT:
        return get_string_list(c, v, &exempt_rule, &cfg->exempt_namespaces,
                               &cfg->n_exempt_namespaces);
    case TK_AUDIT:
        return walk_mapping(c, v, "audit", audit_keys, 3, audit_field, &cfg->audit);
    case TK_MODELS:
        t->models = v;
        return GQ_OK;
    case TK_DEVCLASSES:
        t->device_classes = v;
        return GQ_OK;
    case TK_GPU_DRIVERS:
        return get_string_list(c, v, &drivers_rule, &cfg->gpu_drivers, &cfg->n_gpu_drivers);
    }
    return GQ_OK;
}

static gq_code resolve_default_model(pctx *c, gq_config *cfg, const yaml_node_t *n)
{
    char *name = NULL;
    gq_code rc = get_opt_string(c, n, "defaultModel", &name);
    if (rc || !name)
        return rc;
    ssize_t at = model_index(cfg->models, cfg->n_models, name);
    if (at < 0) {
        char valid[256] = "";
        size_t len = 0;
        for (size_t i = 0; i < cfg->n_models && len < sizeof(valid); i++)
            len += (size_t)snprintf(valid + len, sizeof(valid) - len, "%s%s", i ? ", " : "",
                                    cfg->models[i].name);
        rc = perr(c, n, GQ_EINVAL, "defaultModel: \"%.64s\" is not a model name (models: %s)", name,
                  valid);
        free(name);
        return rc;
    }
    free(name);
    if (!(cfg->default_model = strdup(cfg->models[at].name)))
        return oom(c);
    return GQ_OK;
}

/* Syntax errors from libyaml, as "file:line: problem (context)". */
static gq_code syntax_error(const yaml_parser_t *p, const char *file, gq_err *err)
{
    if (p->error == YAML_MEMORY_ERROR)
        return gq_err_set(err, GQ_ENOMEM, "%.200s: out of memory", file);
    if (p->context)
        return perr_line(err, file, p->problem_mark.line + 1, GQ_EINVAL, "%s %s at line %zu",
                         p->problem ? p->problem : "syntax error", p->context,
                         (size_t)p->context_mark.line + 1);
    return perr_line(err, file, p->problem_mark.line + 1, GQ_EINVAL, "%s",
                     p->problem ? p->problem : "syntax error");
}

/* Where scan_events is in the event stream. */
typedef struct scan {
    const char *file;
    gq_err *err;
    int depth, docs;
    bool done; /* the stream ended */
} scan;

/* The anchor and tag of a scalar or the start of a collection, else NULL. */
static void event_props(const yaml_event_t *ev, const yaml_char_t **anchor, const yaml_char_t **tag)
{
    *anchor = *tag = NULL;
    if (ev->type == YAML_SCALAR_EVENT) {
        *anchor = ev->data.scalar.anchor;
        *tag = ev->data.scalar.tag;
    } else if (ev->type == YAML_MAPPING_START_EVENT) {
        *anchor = ev->data.mapping_start.anchor;
        *tag = ev->data.mapping_start.tag;
    } else if (ev->type == YAML_SEQUENCE_START_EVENT) {
        *anchor = ev->data.sequence_start.anchor;
        *tag = ev->data.sequence_start.tag;
    }
}

/* One event: a second document, an alias, an anchor, a tag or nesting past
 * MAX_DEPTH is an error. */
static gq_code scan_event(scan *sc, const yaml_event_t *ev)
{
    size_t line = ev->start_mark.line + 1;
    const yaml_char_t *anchor, *tag;
    switch (ev->type) {
    case YAML_STREAM_END_EVENT:
        sc->done = true;
        break;
    case YAML_DOCUMENT_START_EVENT:
        if (++sc->docs > 1)
            return perr_line(sc->err, sc->file, line, GQ_EINVAL,
                             "a second YAML document; the configuration is one document");
        break;
    case YAML_ALIAS_EVENT:
        return perr_line(sc->err, sc->file, line, GQ_EINVAL, "aliases (*%.64s) are not allowed",
                         (const char *)ev->data.alias.anchor);
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT:
        if (++sc->depth > MAX_DEPTH)
            return perr_line(sc->err, sc->file, line, GQ_ELIMIT, "nested deeper than %d levels",
                             MAX_DEPTH);
        break;
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        sc->depth--;
        break;
    default:
        break;
    }
    event_props(ev, &anchor, &tag);
    if (anchor)
        return perr_line(sc->err, sc->file, line, GQ_EINVAL, "anchors (&%.64s) are not allowed",
                         (const char *)anchor);
    if (tag)
        return perr_line(sc->err, sc->file, line, GQ_EINVAL, "tags (%.64s) are not allowed",
                         (const char *)tag);
    return GQ_OK;
}

/* First pass: syntax, and the constructs the schema never needs. */
static gq_code scan_events(const char *buf, size_t len, const char *file, gq_err *err)
{
    yaml_parser_t p;
    yaml_event_t ev;
    gq_code rc = GQ_OK;
    scan sc = {file, err, 0, 0, false};
    if (!yaml_parser_initialize(&p))
        return gq_err_set(err, GQ_ENOMEM, "%.200s: out of memory", file);
    yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
    while (!sc.done && !rc) {
        if (!yaml_parser_parse(&p, &ev)) {
            rc = syntax_error(&p, file, err);
            break;
        }
        rc = scan_event(&sc, &ev);
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return rc;
}

gq_code gq_config_parse(const char *buf, size_t len, const char *filename, gq_config **out,
                        gq_err *err)
{
    const char *file = filename ? filename : "<config>";
    yaml_parser_t p;
    yaml_document_t doc;
    bool have_parser = false, have_doc = false;
    gq_config *cfg = NULL;
    pctx c = {&doc, file, err};
    gq_code rc;
    if (len > CONFIG_MAX_INPUT)
        return perr_line(err, file, 1, GQ_ELIMIT, "larger than %zu bytes", CONFIG_MAX_INPUT);
    rc = scan_events(buf, len, file, err);
    if (rc)
        return rc;
    rc = gq_config_default(&cfg, err);
    if (rc)
        return rc;
    if (!yaml_parser_initialize(&p)) {
        rc = oom(&c);
        goto out;
    }
    have_parser = true;
    yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&p, &doc)) {
        rc = syntax_error(&p, file, err);
        goto out;
    }
    have_doc = true;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && !is_null(root)) {
        top t = {cfg, NULL, NULL, NULL};
        rc = walk_mapping(&c, root, "configuration", top_keys,
                          sizeof(top_keys) / sizeof(top_keys[0]), top_field, &t);
        if (!rc && t.models)
            rc = parse_models(&c, cfg, t.models);
        if (!rc && t.default_model)
            rc = resolve_default_model(&c, cfg, t.default_model);
        if (!rc && t.device_classes)
            rc = parse_device_classes(&c, cfg, t.device_classes);
        if (rc)
            goto out;
    }
    *out = cfg;
    cfg = NULL;
out:
    if (have_doc)
        yaml_document_delete(&doc);
    if (have_parser)
        yaml_parser_delete(&p);
    gq_config_free(cfg);
    return rc;
}

/* ---- rendering -------------------------------------------------------- */

/* The rendered text at most. Every reader of a configuration takes at
 * most 1 MiB of it; escaping makes one byte at most four (\xXX), and the
 * defaults written out add under a KiB. */
#define CONFIG_YAML_MAX ((size_t)8 << 20)

/* Plain (unquoted) only when YAML cannot read the text as anything but this
 * string: a conservative character set; none of the words YAML 1.1 or 1.2
 * resolve to booleans or null; and a leading digit only next to a letter no
 * number syntax uses (so "1g.10gb" stays plain, "1e3" and "0x1f" do not). */
static bool plain_safe(const char *s)
{
    static const char *const special[] = {"true", "false", "yes", "no", "on",
                                          "off",  "null",  "y",   "n"};
    bool digit_first = *s >= '0' && *s <= '9', word_letter = false;
    if (!digit_first && !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
        return false;
    for (const char *p = s; *p; p++) {
        if (!is_alnum(*p) && *p != '-' && *p != '_' && *p != '.' && *p != '/')
            return false;
        if (is_alnum(*p) && !(*p >= '0' && *p <= '9') && !strchr("eExXoObB", *p))
            word_letter = true;
    }
    if (digit_first && !word_letter)
        return false;
    for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
        if (!strcasecmp(s, special[i]))
            return false;
    return true;
}

/* s as a YAML scalar: plain when safe, else double-quoted with escapes. */
static void sb_scalar(gq_buf *b, const char *s)
{
    if (!s)
        s = "";
    if (plain_safe(s)) {
        gq_buf_puts(b, s);
        return;
    }
    gq_buf_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            gq_buf_add(b, esc, 2);
        } else if (*p < 0x20 || *p == 0x7f) {
            snprintf(esc, sizeof(esc), "\\x%02x", *p);
            gq_buf_puts(b, esc);
        } else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
            /* C1 controls (U+0080..U+009F) are not printable in a YAML
             * stream: libyaml refuses them raw, so they are escaped. */
            snprintf(esc, sizeof(esc), "\\u%04x", p[1]);
            gq_buf_puts(b, esc);
            p++;
        } else if (*p == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9)) {
            /* U+2028 and U+2029 are line breaks to libyaml: raw, a quoted
             * scalar would fold them into a space. */
            gq_buf_puts(b, p[2] == 0xa8 ? "\\u2028" : "\\u2029");
            p += 2;
        } else if (*p == 0xef && (p[1] == 0xbb && p[2] == 0xbf)) {
            gq_buf_puts(b, "\\ufeff"); /* a byte order mark inside the stream */
            p += 2;
        } else if (*p == 0xef && p[1] == 0xbf && (p[2] == 0xbe || p[2] == 0xbf)) {
            snprintf(esc, sizeof(esc), "\\u%04x", p[2] == 0xbe ? 0xfffeu : 0xffffu);
            gq_buf_puts(b, esc);
            p += 2;
        } else {
            gq_buf_add(b, (const char *)p, 1);
        }
    }
    gq_buf_puts(b, "\"");
}

static void sb_key(gq_buf *b, const char *indent, const char *key)
{
    gq_buf_puts(b, indent);
    gq_buf_puts(b, key);
    gq_buf_puts(b, ": ");
}

static void sb_bytes(gq_buf *b, int64_t bytes)
{
    char q[GQ_QUANTITY_STR_MAX];
    gq_format_bytes(bytes, q);
    gq_buf_puts(b, q);
}

static void sb_list(gq_buf *b, char *const *v, size_t n)
{
    gq_buf_puts(b, "[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            gq_buf_puts(b, ", ");
        sb_scalar(b, v[i]);
    }
    gq_buf_puts(b, "]");
}

static void sb_audit(gq_buf *b, const gq_audit_config *a)
{
    char num[32];
    gq_buf_puts(b, "\naudit:");
    sb_key(b, "\n  ", "path");
    sb_scalar(b, a->path);
    sb_key(b, "\n  ", "maxSize");
    sb_bytes(b, a->max_size);
    snprintf(num, sizeof(num), "%d", a->max_files);
    sb_key(b, "\n  ", "maxFiles");
    gq_buf_puts(b, num);
}

static void sb_models(gq_buf *b, const gq_config *cfg)
{
    gq_buf_puts(b, "\nmodels:");
    if (!cfg->n_models)
        gq_buf_puts(b, " []");
    for (size_t i = 0; i < cfg->n_models; i++) {
        const gq_model *m = &cfg->models[i];
        sb_key(b, "\n  - ", "name");
        sb_scalar(b, m->name);
        sb_key(b, "\n    ", "memory");
        sb_bytes(b, m->memory);
        sb_key(b, "\n    ", "products");
        sb_list(b, m->products, m->n_products);
        sb_key(b, "\n    ", "migProfiles");
        gq_buf_puts(b, "[");
        for (size_t j = 0; j < m->n_mig; j++) {
            if (j)
                gq_buf_puts(b, ", ");
            sb_scalar(b, m->mig[j].name);
        }
        gq_buf_puts(b, "]");
    }
}

static void sb_device_classes(gq_buf *b, const gq_config *cfg)
{
    gq_buf_puts(b, "\ndeviceClasses:");
    if (!cfg->n_device_classes)
        gq_buf_puts(b, " []");
    for (size_t i = 0; i < cfg->n_device_classes; i++) {
        sb_key(b, "\n  - ", "name");
        sb_scalar(b, cfg->device_classes[i].name);
        sb_key(b, "\n    ", "model");
        sb_scalar(b, cfg->device_classes[i].model);
    }
}

gq_code gq_config_to_yaml(const gq_config *cfg, char **out, size_t *out_len, gq_err *err)
{
    gq_buf b;
    char num[32];
    const char *backend = gq_backend_name(cfg->backend);
    if (!backend)
        return gq_err_set(err, GQ_EINVAL, "configuration has an unknown backend (%d)",
                          (int)cfg->backend);
    gq_buf_init(&b, CONFIG_YAML_MAX);
    sb_key(&b, "", "backend");
    gq_buf_puts(&b, backend);
    sb_key(&b, "\n", "memoryUnit");
    sb_bytes(&b, cfg->memory_unit);
    sb_key(&b, "\n", "schedulerName");
    sb_scalar(&b, cfg->scheduler_name);
    sb_key(&b, "\n", "defaultModel");
    sb_scalar(&b, cfg->default_model);
    sb_key(&b, "\n", "requireQuota");
    gq_buf_puts(&b, cfg->require_quota ? "true" : "false");
    snprintf(num, sizeof(num), "%d", cfg->max_queued_pods);
    sb_key(&b, "\n", "maxQueuedPods");
    gq_buf_puts(&b, num);
    sb_key(&b, "\n", "exemptNamespaces");
    sb_list(&b, cfg->exempt_namespaces, cfg->n_exempt_namespaces);
    sb_audit(&b, &cfg->audit);
    sb_models(&b, cfg);
    sb_device_classes(&b, cfg);
    sb_key(&b, "\n", "gpuDrivers");
    sb_list(&b, cfg->gpu_drivers, cfg->n_gpu_drivers);
    gq_buf_puts(&b, "\n");
    gq_code rc = gq_buf_finish(&b, out, out_len);
    if (rc == GQ_ELIMIT)
        return gq_err_set(err, rc, "the configuration renders longer than %zu bytes",
                          CONFIG_YAML_MAX);
    if (rc)
        return gq_err_set(err, rc, "out of memory rendering the configuration");
    return GQ_OK;
}
