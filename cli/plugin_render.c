/* Pure rendering of `kubectl gpuquota`: reports from quota objects, bars,
 * tables and YAML. No I/O other than the FILE* given. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "quota/crd.h"
#include "common/jsonutil.h"
#include "cli/plugin.h"
#include "common/json_member.h"
#include "quota/policy.h"
#include "quota/quantity.h"

void cli_render_bar(int64_t used, int64_t pending, int64_t hard, char buf[CLI_BAR_WIDTH + 3])
{
    int n_used = 0, n_pend = 0;
    bool over = false;
    if (used < 0)
        used = 0;
    if (pending < 0)
        pending = 0;
    if (hard <= 0) {
        n_used = used || pending ? CLI_BAR_WIDTH : 0;
        over = (used || pending) && hard == 0;
    } else {
        /* cells = ceil-for-nonzero(part * W / hard), in long double so
         * byte counts near INT64_MAX cannot overflow. */
        long double w = CLI_BAR_WIDTH;
        long double u = (long double)used * w / (long double)hard;
        long double p = (long double)pending * w / (long double)hard;
        n_used = u >= w ? CLI_BAR_WIDTH : (int)u;
        if (used && !n_used)
            n_used = 1;
        n_pend = (u + p) >= w ? CLI_BAR_WIDTH - n_used : (int)(u + p) - n_used;
        if (pending && n_pend <= 0 && n_used < CLI_BAR_WIDTH)
            n_pend = 1;
        if (n_pend < 0)
            n_pend = 0;
        over = used > hard || pending > hard - used;
    }
    char *b = buf;
    *b++ = '[';
    for (int i = 0; i < CLI_BAR_WIDTH; i++)
        *b++ = i < n_used ? '#' : i < n_used + n_pend ? '=' : '.';
    if (over)
        b[-1] = '!';
    *b++ = ']';
    *b = '\0';
}

/* ---- the report -------------------------------------------------------------- */

void cli_fmt_amount(int k, int64_t v, char buf[GQ_QUANTITY_STR_MAX])
{
    if (k == GQ_KEY_GPU_MEMORY)
        gq_format_bytes(v, buf);
    else
        snprintf(buf, GQ_QUANTITY_STR_MAX, "%" PRId64, v);
}

void cli_quota_ident(json_object *o, const gq_quota *q)
{
    json_object_object_add(o, "kind",
                           json_object_new_string(q->kind == GQ_QUOTA_TENANT
                                                      ? GQ_KIND_GPUTENANTQUOTA
                                                      : GQ_KIND_GPUQUOTA));
    if (q->namespace_)
        json_object_object_add(o, "namespace", json_object_new_string(q->namespace_));
    json_object_object_add(o, "name", json_object_new_string(q->name));
}

gq_code cli_objs_collect(void *ud, json_object *item, gq_err *err)
{
    cli_objs *o = ud;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 16;
        json_object **nv;
        if (o->n >= o->max)
            return gq_err_set(err, GQ_ELIMIT, "more than %zu objects", o->max);
        if (!(nv = realloc(o->v, cap * sizeof(*nv))))
            return gq_err_oom(err);
        o->v = nv;
        o->cap = cap;
    }
    if (o->n >= o->max)
        return gq_err_set(err, GQ_ELIMIT, "more than %zu objects", o->max);
    o->v[o->n++] = json_object_get(item);
    return GQ_OK;
}

void cli_objs_dispose(cli_objs *o)
{
    for (size_t i = 0; i < o->n; i++)
        json_object_put(o->v[i]);
    free(o->v);
    o->v = NULL;
    o->n = o->cap = 0;
}

static json_object *amount_json(gq_qkey k, int64_t v)
{
    char buf[GQ_QUANTITY_STR_MAX];
    cli_fmt_amount(k, v, buf);
    return json_object_new_string(buf);
}

/* An optional ResourceList of the status (status.queued, a model's used):
 * absent or unreadable leaves *out unset and returns false. */
static bool opt_amounts(json_object *obj, const char *field, gq_amounts *out)
{
    gq_err e;
    if (!obj || !json_object_is_type(obj, json_type_object))
        return false;
    return gq_amounts_parse(obj, field, out, &e) == GQ_OK;
}

static json_object *amounts_json_or_null(json_object *obj, const char *field)
{
    gq_amounts a;
    return opt_amounts(obj, field, &a) ? gq_amounts_to_json(&a) : NULL;
}

/* The quota's per-model limits (spec.models) with what each model uses
 * (status.usedByModel), as the report shows them; NULL when it limits no
 * model. */
static json_object *models_json(const gq_quota *q)
{
    if (!q->n_models)
        return NULL;
    json_object *out = json_object_new_array();
    for (size_t i = 0; out && i < q->n_models; i++) {
        const gq_model_limit *m = &q->models[i];
        json_object *e = json_object_new_object();
        json_object_object_add(e, "model", json_object_new_string(m->name));
        json_object_object_add(e, "used", gq_amounts_to_json(&m->used));
        json_object_object_add(e, "hard", gq_amounts_to_json(&m->hard));
        json_object_array_add(out, e);
    }
    return out;
}

/* What a quota's status reports beyond used: each present or not. */
typedef struct status_figures {
    bool has_queued, has_borrowed, has_lent;
    gq_amounts queued, borrowed, lent;
} status_figures;

/* "borrowed"/"lent" (and their "...Value") of key k when the status has it. */
static void lending_json(json_object *r, gq_qkey k, const status_figures *f)
{
    if (f->has_borrowed && f->borrowed.set[k]) {
        json_object_object_add(r, "borrowed", amount_json(k, f->borrowed.v[k]));
        json_object_object_add(r, "borrowedValue", json_object_new_int64(f->borrowed.v[k]));
    }
    if (f->has_lent && f->lent.set[k]) {
        json_object_object_add(r, "lent", amount_json(k, f->lent.v[k]));
        json_object_object_add(r, "lentValue", json_object_new_int64(f->lent.v[k]));
    }
}

static json_object *resource_json(gq_qkey k, const gq_quota *q, const gq_amounts *in_use,
                                  const status_figures *f)
{
    bool has_queued = f->has_queued;
    const gq_amounts *queued = &f->queued;
    json_object *r = json_object_new_object();
    int64_t hard = q->hard.v[k], used = q->used.v[k];
    int64_t reserved = in_use->v[k] - used, pend = reserved;
    char buf[GQ_QUANTITY_STR_MAX];
    if (reserved < 0)
        reserved = 0;
    json_object_object_add(r, "resource", json_object_new_string(gq_qkey_name(k)));
    gq_amount_format(&q->hard, k, buf);
    json_object_object_add(r, "hard", json_object_new_string(buf));
    json_object_object_add(r, "used", amount_json(k, used));
    json_object_object_add(r, "reserved", amount_json(k, reserved));
    if (has_queued) {
        json_object_object_add(r, "queued", amount_json(k, queued->v[k]));
        if (queued->v[k] <= INT64_MAX - pend)
            pend += queued->v[k];
    }
    json_object_object_add(r, "hardValue", json_object_new_int64(hard));
    json_object_object_add(r, "usedValue", json_object_new_int64(used));
    json_object_object_add(r, "reservedValue", json_object_new_int64(reserved));
    if (has_queued)
        json_object_object_add(r, "queuedValue", json_object_new_int64(queued->v[k]));
    long double taken = (long double)used + (long double)pend;
    int pct = hard > 0 ? (int)(taken * 100.0L / (long double)hard) : (taken > 0 ? 100 : 0);
    json_object_object_add(r, "percent", json_object_new_int(pct));
    lending_json(r, k, f);
    return r;
}

typedef struct parsed {
    gq_quota *q;
    json_object *obj; /* borrowed */
} parsed;

static int cmp_parsed(const void *a, const void *b)
{
    const gq_quota *x = ((const parsed *)a)->q, *y = ((const parsed *)b)->q;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    int c = strcmp(x->namespace_ ? x->namespace_ : "", y->namespace_ ? y->namespace_ : "");
    return c ? c : strcmp(x->name, y->name);
}

/* "ns/name: why" of an object that does not parse as a quota. */
static void add_parse_error(json_object *errors, json_object *obj, const gq_err *e)
{
    json_object *meta = gq_json_member(obj, "metadata");
    const char *ns = gq_json_get_string(meta, "namespace"),
               *name = gq_json_get_string(meta, "name");
    char line[GQ_ERR_MSG_MAX + 300];
    snprintf(line, sizeof(line), "%s%s%s: %s", ns ? ns : "", ns ? "/" : "",
             name ? name : "(unnamed)", e->msg);
    json_object_array_add(errors, json_object_new_string(line));
}

/* objs[0..n) parsed into ps, sorted; those that do not parse are described
 * in errors. Returns how many parsed. */
static size_t parse_quotas(json_object *const *objs, size_t n, parsed *ps, json_object *errors)
{
    size_t np = 0;
    for (size_t i = 0; i < n; i++) {
        gq_err e;
        gq_err_clear(&e);
        if (gq_quota_parse(objs[i], &ps[np].q, &e)) {
            add_parse_error(errors, objs[i], &e);
            continue;
        }
        ps[np++].obj = objs[i];
    }
    if (np)
        qsort(ps, np, sizeof(*ps), cmp_parsed);
    return np;
}

/* A tenant's status.namespaces: what each namespace uses. */
static json_object *namespaces_json(json_object *nss)
{
    json_object *list = json_object_new_array();
    size_t m = json_object_array_length(nss);
    for (size_t j = 0; j < m && j < GQ_CRD_MAX_NAMESPACES; j++) {
        json_object *it = json_object_array_get_idx(nss, j), *used;
        const char *ns = gq_json_get_string(it, "namespace");
        if (!ns || !(used = amounts_json_or_null(gq_json_member(it, "used"), "used")))
            continue;
        json_object *e2 = json_object_new_object();
        json_object_object_add(e2, "namespace", json_object_new_string(ns));
        json_object_object_add(e2, "used", used);
        json_object_array_add(list, e2);
    }
    return list;
}

/* One quota of the report: its resources, a tenant's namespaces, its models. */
static json_object *quota_report(const parsed *p, int64_t now)
{
    const gq_quota *q = p->q;
    json_object *status = gq_json_member(p->obj, "status");
    gq_amounts in_use;
    gq_err e;
    status_figures f;
    f.has_queued = opt_amounts(gq_json_member(status, "queued"), "status.queued", &f.queued);
    f.has_borrowed =
        opt_amounts(gq_json_member(status, "borrowed"), "status.borrowed", &f.borrowed);
    f.has_lent = opt_amounts(gq_json_member(status, "lent"), "status.lent", &f.lent);
    if (gq_quota_in_use(q, now, NULL, &in_use, &e))
        in_use = q->used; /* overflowing reservations: show used alone */
    json_object *o = json_object_new_object(), *res = json_object_new_array();
    cli_quota_ident(o, q);
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (q->hard.set[k])
            json_object_array_add(res, resource_json((gq_qkey)k, q, &in_use, &f));
    json_object_object_add(o, "resources", res);
    json_object *nss = gq_json_member(status, "namespaces");
    if (q->kind == GQ_QUOTA_TENANT && nss && json_object_is_type(nss, json_type_array))
        json_object_object_add(o, "namespaces", namespaces_json(nss));
    json_object *models = models_json(q);
    if (models)
        json_object_object_add(o, "models", models);
    return o;
}

gq_code cli_top_report(json_object *const *objs, size_t n, int64_t now, json_object **out,
                       gq_err *err)
{
    parsed *ps = n ? calloc(n, sizeof(*ps)) : NULL;
    size_t np = 0;
    gq_code rc = GQ_OK;
    json_object *report = json_object_new_object(), *quotas = json_object_new_array(),
                *errors = json_object_new_array();
    if ((n && !ps) || !report || !quotas || !errors) {
        rc = gq_err_oom(err);
        goto out;
    }
    np = parse_quotas(objs, n, ps, errors);
    for (size_t i = 0; i < np; i++)
        json_object_array_add(quotas, quota_report(&ps[i], now));
    json_object_object_add(report, "quotas", quotas);
    quotas = NULL;
    if (json_object_array_length(errors)) {
        json_object_object_add(report, "errors", errors);
        errors = NULL;
    }
    *out = report;
    report = NULL;
out:
    for (size_t i = 0; i < np; i++)
        gq_quota_free(ps[i].q);
    free(ps);
    json_object_put(report);
    json_object_put(quotas);
    json_object_put(errors);
    return rc;
}

/* ---- the table ------------------------------------------------------------- */

static const char *str_or(json_object *o, const char *key, const char *dflt)
{
    const char *s = gq_json_get_string(o, key);
    return s ? s : dflt;
}

static int64_t int_member(json_object *o, const char *key)
{
    json_object *v = gq_json_member(o, key);
    return v ? json_object_get_int64(v) : 0;
}

/* "gpu-memory=8Gi gpus=1" from a ResourceList object. */
static void list_text(json_object *amounts, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    if (!amounts || !json_object_is_type(amounts, json_type_object))
        return;
    json_object_object_foreach(amounts, k, v)
    {
        int w =
            snprintf(buf + len, cap - len, "%s%s=%s", len ? " " : "", k,
                     json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "?");
        if (w < 0 || (size_t)w >= cap - len)
            break;
        len += (size_t)w;
    }
}

#define ROW_FMT "%-9s %-22s %-12s %10s %10s %10s %10s%s  %s %3d%%\n"

/* A quota's rows: one per resource with a hard limit, the first naming it;
 * with lending, BORROWED and LENT ("-": not reported) after HARD. */
static void render_resources(FILE *out, json_object *q, bool tenant, const char *name, bool lending)
{
    json_object *res = gq_json_member(q, "resources");
    size_t nr = res ? json_object_array_length(res) : 0;
    if (!nr)
        fprintf(out, "%-9s %-22s %-12s\n", tenant ? "tenant" : "namespace", name,
                "(no hard limits)");
    for (size_t j = 0; j < nr; j++) {
        json_object *r = json_object_array_get_idx(res, j);
        char bar[CLI_BAR_WIDTH + 3];
        int64_t pend = int_member(r, "reservedValue");
        int64_t queued = int_member(r, "queuedValue");
        if (queued > 0 && pend <= INT64_MAX - queued)
            pend += queued;
        cli_render_bar(int_member(r, "usedValue"), pend, int_member(r, "hardValue"), bar);
        char lent[128] = "";
        if (lending)
            snprintf(lent, sizeof lent, " %10s %10s", str_or(r, "borrowed", "-"),
                     str_or(r, "lent", "-"));
        fprintf(out, ROW_FMT,
                j        ? ""
                : tenant ? "tenant"
                         : "namespace",
                j ? "" : name, str_or(r, "resource", "?"), str_or(r, "used", "0"),
                str_or(r, "reserved", "0"), str_or(r, "queued", "-"), str_or(r, "hard", "?"), lent,
                bar, (int)int_member(r, "percent"));
    }
}

/* Under a quota: what each of a tenant's namespaces uses, and each model. */
static void render_details(FILE *out, json_object *q)
{
    json_object *nss = gq_json_member(q, "namespaces"), *models = gq_json_member(q, "models");
    size_t nn = nss ? json_object_array_length(nss) : 0;
    for (size_t j = 0; j < nn; j++) {
        json_object *e = json_object_array_get_idx(nss, j);
        char used[256];
        list_text(gq_json_member(e, "used"), used, sizeof(used));
        fprintf(out, "%-9s   namespace %s: %s\n", "", str_or(e, "namespace", "?"), used);
    }
    size_t nm = models ? json_object_array_length(models) : 0;
    for (size_t j = 0; j < nm; j++) {
        json_object *e = json_object_array_get_idx(models, j);
        char used[256], hard[256];
        list_text(gq_json_member(e, "used"), used, sizeof(used));
        list_text(gq_json_member(e, "hard"), hard, sizeof(hard));
        fprintf(out, "%-9s   model %s: used %s%s%s\n", "", str_or(e, "model", "?"), used,
                hard[0] ? ", hard " : "", hard);
    }
}

static void render_quota(FILE *out, json_object *q, bool lending)
{
    bool tenant = !strcmp(str_or(q, "kind", ""), GQ_KIND_GPUTENANTQUOTA);
    char name[300];
    if (tenant)
        snprintf(name, sizeof(name), "%s", str_or(q, "name", "?"));
    else
        snprintf(name, sizeof(name), "%s/%s", str_or(q, "namespace", "?"), str_or(q, "name", "?"));
    render_resources(out, q, tenant, name, lending);
    render_details(out, q);
}

/* Whether a quota of the report says what it borrows or lends: the table
 * then has those columns (a cluster without borrowing keeps its width). */
static bool any_lending(json_object *quotas, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        json_object *res = gq_json_member(json_object_array_get_idx(quotas, i), "resources");
        size_t nr = json_object_is_type(res, json_type_array) ? json_object_array_length(res) : 0;
        for (size_t j = 0; j < nr; j++) {
            json_object *r = json_object_array_get_idx(res, j);
            if (gq_json_member(r, "borrowed") || gq_json_member(r, "lent"))
                return true;
        }
    }
    return false;
}

void cli_render_top_table(FILE *out, json_object *report)
{
    json_object *quotas = gq_json_member(report, "quotas"),
                *errors = gq_json_member(report, "errors");
    size_t n = quotas && json_object_is_type(quotas, json_type_array)
                   ? json_object_array_length(quotas)
                   : 0;
    bool lending = any_lending(quotas, n);
    if (!n) {
        fprintf(out, "No GPU quotas found.\n");
    } else {
        fprintf(out, "%-9s %-22s %-12s %10s %10s %10s %10s%s  USAGE\n", "KIND", "QUOTA", "RESOURCE",
                "USED", "RESERVED", "QUEUED", "HARD", lending ? "   BORROWED       LENT" : "");
    }
    for (size_t i = 0; i < n; i++)
        render_quota(out, json_object_array_get_idx(quotas, i), lending);
    size_t ne = errors ? json_object_array_length(errors) : 0;
    for (size_t i = 0; i < ne; i++)
        fprintf(out, "unreadable quota %s\n",
                json_object_get_string(json_object_array_get_idx(errors, i)));
}

/* ---- YAML ------------------------------------------------------------------ */

/* Whether a YAML plain scalar s would be read back as the same string. */
static bool plain_ok(const char *s)
{
    static const char *const reserved[] = {
        "true", "false", "yes", "no",   "on",   "off",  "null",  "~", "True", "False", "Yes",
        "No",   "On",    "Off", "Null", "NULL", "TRUE", "FALSE", "y", "n",    "Y",     "N"};
    if (!s[0] || strchr("-?:,[]{}#&*!|>'\"%@` \t", s[0]))
        return false;
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
        if (!strcmp(s, reserved[i]))
            return false;
    char *end;
    (void)strtod(s, &end);
    if (*end == '\0')
        return false; /* a number */
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20 || c == 0x7f || c == '#' || (c == ':' && (p[1] == ' ' || !p[1])) ||
            (c == ' ' && (p[1] == '#' || !p[1])))
            return false;
    }
    return true;
}

static void yaml_scalar(FILE *out, json_object *v)
{
    if (!v) {
        fputs("null", out);
    } else if (json_object_is_type(v, json_type_string)) {
        const char *s = json_object_get_string(v);
        if (plain_ok(s))
            fputs(s, out);
        else /* a JSON string is a valid YAML double-quoted scalar */
            fputs(json_object_to_json_string_ext(v, JSON_C_TO_STRING_NOSLASHESCAPE), out);
    } else {
        fputs(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN), out);
    }
}

static bool is_container(json_object *v)
{
    if (json_object_is_type(v, json_type_object))
        return json_object_object_length(v) > 0;
    if (json_object_is_type(v, json_type_array))
        return json_object_array_length(v) > 0;
    return false;
}

static void yaml_key(FILE *out, const char *k)
{
    json_object *tmp = json_object_new_string(k);
    yaml_scalar(out, tmp);
    json_object_put(tmp);
}

/* v at indentation ind; the caller has written the line's prefix. */
static void yaml_value(FILE *out, json_object *v, int ind, int depth)
{
    if (depth > GQ_JSON_DEFAULT_DEPTH) {
        fputs("null\n", out);
        return;
    }
    if (v && json_object_is_type(v, json_type_object) && json_object_object_length(v)) {
        bool first = true;
        json_object_object_foreach(v, k, c)
        {
            if (!first)
                fprintf(out, "%*s", ind, "");
            first = false;
            yaml_key(out, k);
            if (c && is_container(c)) {
                fputs(":\n", out);
                fprintf(out, "%*s", ind + 2, "");
                yaml_value(out, c, ind + 2, depth + 1);
            } else {
                fputs(": ", out);
                yaml_value(out, c, ind + 2, depth + 1);
            }
        }
    } else if (v && json_object_is_type(v, json_type_array) && json_object_array_length(v)) {
        size_t n = json_object_array_length(v);
        for (size_t i = 0; i < n; i++) {
            if (i)
                fprintf(out, "%*s", ind, "");
            fputs("- ", out);
            yaml_value(out, json_object_array_get_idx(v, i), ind + 2, depth + 1);
        }
    } else if (v && json_object_is_type(v, json_type_object)) {
        fputs("{}\n", out);
    } else if (v && json_object_is_type(v, json_type_array)) {
        fputs("[]\n", out);
    } else {
        yaml_scalar(out, v);
        fputc('\n', out);
    }
}

void cli_render_yaml(FILE *out, json_object *v)
{
    yaml_value(out, v, 0, 0);
}
