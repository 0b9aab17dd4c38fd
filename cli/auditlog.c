#include "cli/auditlog.h"

#include <inttypes.h>
#include <stdio.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/json_member.h"
#include "quota/policy.h"

/* The suffix of gpuquota's webhook names (mutate.gpuquota.io, ...): how an
 * Event's annotations and messages are told apart from other webhooks'. */
#define CLI_WEBHOOK_SUFFIX "gpuquota.io"

static bool ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

/* A webhook name of ours: "gpuquota.io" or "*.gpuquota.io". */
static bool is_our_webhook(const char *s, size_t n)
{
    return ends_with(s, n, "." CLI_WEBHOOK_SUFFIX) ||
           (n == strlen(CLI_WEBHOOK_SUFFIX) && !memcmp(s, CLI_WEBHOOK_SUFFIX, n));
}

/* The short name shown for webhook NAME: its first label ("validate" for
 * validate.gpuquota.io). */
static char *short_webhook(const char *s, size_t n)
{
    const char *dot = memchr(s, '.', n);
    return strndup(s, dot && dot != s ? (size_t)(dot - s) : n);
}

/* "gpu-memory=16Gi,gpus=0,gpu-pods=1" (an auditAnnotations value) into
 * amounts; false when it is not that shape. */
static bool parse_charge_text(const char *s, gq_amounts *out)
{
    json_object *obj = json_object_new_object();
    bool ok = obj != NULL && *s;
    while (ok && *s) {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        const char *eq = memchr(s, '=', n);
        char *key = eq ? strndup(s, (size_t)(eq - s)) : NULL;
        json_object *val = eq ? json_object_new_string_len(eq + 1, (int)(s + n - eq - 1)) : NULL;
        ok = key && val && json_object_object_add(obj, key, val) == 0;
        if (!ok)
            json_object_put(val);
        free(key);
        s += n + (comma ? 1 : 0);
        if (comma && !*s)
            ok = false;
    }
    gq_amounts a;
    if (ok && gq_amounts_parse(obj, "charge", &a, NULL) == GQ_OK)
        *out = a;
    else
        ok = false;
    json_object_put(obj);
    return ok;
}

/* The webhook NAME quoted after prefix in msg ("admission webhook \"NAME\"
 * denied the request"), when it is ours: *name and *name_len, and the text
 * after the closing quote in *rest. */
static bool quoted_webhook(const char *msg, const char *prefix, const char **name, size_t *name_len,
                           const char **rest)
{
    const char *p = strstr(msg, prefix);
    if (!p)
        return false;
    p += strlen(prefix);
    const char *q = strchr(p, '"');
    if (!q || !is_our_webhook(p, (size_t)(q - p)))
        return false;
    *name = p;
    *name_len = (size_t)(q - p);
    *rest = q + 1;
    return true;
}

static const char *map_verb(const char *verb)
{
    static const struct {
        const char *verb, *op;
    } map[] = {{"create", "CREATE"}, {"update", "UPDATE"},           {"patch", "UPDATE"},
               {"delete", "DELETE"}, {"deletecollection", "DELETE"}, {"connect", "CONNECT"}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (!strcmp(verb, map[i].verb))
            return map[i].op;
    return NULL;
}

/* A dryRun query parameter with a value (kube-apiserver accepts only "All"). */
static bool uri_dry_run(const char *uri)
{
    const char *q = uri ? strchr(uri, '?') : NULL;
    while (q) {
        q++;
        if (!strncmp(q, "dryRun=", 7) && q[7] && q[7] != '&')
            return true;
        q = strchr(q, '&');
    }
    return false;
}

static void set_time(gq_audit_entry *e)
{
    int64_t t;
    if (e->time && gq_time_parse_rfc3339(e->time, &t, NULL) == GQ_OK) {
        e->t = t;
        e->has_time = true;
    }
}

/* What our own webhooks wrote into an Event's annotations. */
typedef struct {
    const char *wh; /* "<webhook name>/..." key naming the webhook */
    size_t wh_len;
    const char *decision, *charge, *charged;
} our_annotations;

/* Our annotations, keyed "<webhook name>/<key>"; a "decision" key names the
 * webhook over any other. */
static void read_our_keys(json_object *ann, our_annotations *o)
{
    json_object_object_foreach(ann, key, val)
    {
        if (!json_object_is_type(val, json_type_string))
            continue;
        const char *slash = strrchr(key, '/');
        if (!slash || !is_our_webhook(key, (size_t)(slash - key)))
            continue;
        const char *k = slash + 1, *s = json_object_get_string(val);
        bool is_decision = !strcmp(k, "decision");
        if (!o->wh || is_decision) {
            o->wh = key;
            o->wh_len = (size_t)(slash - key);
        }
        if (is_decision)
            o->decision = s;
        else if (!strcmp(k, "charge"))
            o->charge = s;
        else if (!strcmp(k, "charged"))
            o->charged = s;
    }
}

/* Without keys of our own, the "mutation.webhook.admission.k8s.io/
 * round_R_index_I" annotations (a JSON object naming each mutating webhook)
 * still say which of ours took part. */
static gq_code read_mutation_rounds(json_object *ann, gq_audit_entry *e, gq_err *err)
{
    gq_code rc = GQ_OK;
    json_object_object_foreach(ann, key, val)
    {
        if (strncmp(key, "mutation.webhook.admission.k8s.io/", 34) ||
            !json_object_is_type(val, json_type_string))
            continue;
        json_object *m = NULL;
        const char *txt = json_object_get_string(val);
        if (gq_json_parse(txt, strlen(txt), 4, &m, NULL) != GQ_OK)
            continue;
        const char *name = m ? gq_json_get_string(m, "webhook") : NULL;
        if (name && is_our_webhook(name, strlen(name))) {
            e->webhook = short_webhook(name, strlen(name));
            if (!e->webhook)
                rc = gq_err_oom(err);
        }
        json_object_put(m);
        if (rc || e->webhook)
            break;
    }
    return rc;
}

/* Which of our webhooks took part, from the annotations kube-apiserver
 * keys "<webhook name>/<key>" (ours) and "mutation.webhook.admission.k8s.io/
 * round_R_index_I" (a JSON object naming each mutating webhook). */
static gq_code read_annotations(json_object *root, gq_audit_entry *e, our_annotations *o,
                                gq_err *err)
{
    json_object *ann = NULL;
    if (!json_object_object_get_ex(root, "annotations", &ann) || !ann)
        return GQ_OK;
    if (!json_object_is_type(ann, json_type_object))
        return gq_err_set(err, GQ_EINVAL, "annotations: not an object");
    read_our_keys(ann, o);
    return o->wh ? GQ_OK : read_mutation_rounds(ann, e, err);
}

/* The response's code into e, its message into *msg (borrowed). */
static gq_code read_response_status(json_object *root, gq_audit_entry *e, const char **msg,
                                    gq_err *err)
{
    json_object *status = NULL, *v = NULL;
    if (!json_object_object_get_ex(root, "responseStatus", &status) || !status)
        return GQ_OK;
    if (!json_object_is_type(status, json_type_object))
        return gq_err_set(err, GQ_EINVAL, "responseStatus: not an object");
    if (json_object_object_get_ex(status, "code", &v) && v) {
        if (!json_object_is_type(v, json_type_int))
            return gq_err_set(err, GQ_EINVAL, "responseStatus.code: not an integer");
        int64_t c = json_object_get_int64(v);
        e->code = c >= 0 && c <= 999 ? (int)c : 0;
    }
    *msg = gq_json_get_string(status, "message");
    return GQ_OK;
}

/* The decision, its reason and the webhook that made it: a failed response's
 * message names the webhook that denied or failed it, over the annotations. */
static gq_code read_outcome(gq_audit_entry *e, const char *msg, const our_annotations *o,
                            gq_err *err)
{
    const char *name = NULL, *rest = NULL;
    size_t name_len = 0;
    e->decision =
        o->decision && !strcmp(o->decision, "denied") ? GQ_AUDIT_DENIED : GQ_AUDIT_ALLOWED;
    if (msg && e->code >= 400 &&
        quoted_webhook(msg, "admission webhook \"", &name, &name_len, &rest) &&
        !strncmp(rest, " denied the request", 19)) {
        e->decision = GQ_AUDIT_DENIED;
        rest += 19;
        if (!strncmp(rest, ": ", 2))
            rest += 2;
        e->reason = strdup(rest);
        if (!e->reason)
            return gq_err_oom(err);
    } else if (msg && e->code >= 400 &&
               quoted_webhook(msg, "failed calling webhook \"", &name, &name_len, &rest)) {
        e->decision = GQ_AUDIT_ERROR;
        e->reason = strdup(msg);
        if (!e->reason)
            return gq_err_oom(err);
    } else {
        name = NULL;
    }
    if (name) {
        free(e->webhook);
        e->webhook = short_webhook(name, name_len);
    } else if (o->wh && !e->webhook) {
        e->webhook = short_webhook(o->wh, o->wh_len);
    } else if (!e->webhook) {
        return gq_err_set(err, GQ_ENOTFOUND, "no gpuquota webhook took part in this request");
    }
    if (!e->webhook)
        return gq_err_oom(err);
    return GQ_OK;
}

/* Who asked for what, when: the request's id, time, verb, user and object. */
static gq_code read_request(json_object *root, gq_audit_entry *e, gq_err *err)
{
    gq_code rc;
    json_object *ref = NULL, *user = NULL;
    if ((rc = gq_json_dup_string(root, "auditID", &e->uid, err)) ||
        (rc = gq_json_dup_string(root, "requestReceivedTimestamp", &e->time, err)))
        return rc;
    const char *verb = gq_json_get_string(root, "verb");
    if (verb) {
        const char *op = map_verb(verb);
        e->operation = op ? strdup(op) : strdup(verb);
        if (!e->operation)
            return gq_err_oom(err);
    }
    e->dry_run = uri_dry_run(gq_json_get_string(root, "requestURI"));
    if (json_object_object_get_ex(root, "user", &user) && user &&
        json_object_is_type(user, json_type_object) &&
        (rc = gq_json_dup_string(user, "username", &e->user, err)))
        return rc;
    if (json_object_object_get_ex(root, "objectRef", &ref) && ref &&
        json_object_is_type(ref, json_type_object) &&
        ((rc = gq_json_dup_string(ref, "namespace", &e->namespace_, err)) ||
         (rc = gq_json_dup_string(ref, "name", &e->name, err))))
        return rc;
    return GQ_OK;
}

static gq_code parse_event(json_object *root, gq_audit_entry *e, gq_err *err)
{
    gq_code rc;
    our_annotations o = {0};
    const char *msg = NULL;
    const char *stage = gq_json_get_string(root, "stage");
    if (stage && strcmp(stage, "ResponseComplete") && strcmp(stage, "Panic"))
        return gq_err_set(err, GQ_ENOTFOUND, "Event stage %.32s carries no admission outcome",
                          stage);
    e->source = GQ_AUDIT_SRC_APISERVER;
    if ((rc = read_annotations(root, e, &o, err)) ||
        (rc = read_response_status(root, e, &msg, err)) || (rc = read_outcome(e, msg, &o, err)))
        return rc;
    if (o.charge && parse_charge_text(o.charge, &e->charge))
        e->has_charge = true;
    else if (o.charged && parse_charge_text(o.charged, &e->charge))
        e->has_charge = true;
    if ((rc = read_request(root, e, err)))
        return rc;
    set_time(e);
    return GQ_OK;
}

/* What `kubectl logs` puts before a container's line: "[pod/NAME/CONTAINER] "
 * with --prefix, then an RFC 3339 time and a space with --timestamps. Each is
 * taken off only when a JSON object follows, so a line of another kind is
 * read (and refused) as it is. */
static void strip_kubectl_prefix(const char **line, size_t *len)
{
    const char *p = *line, *end = *line + *len;
    if (p < end && *p == '[') {
        const char *close = memchr(p, ']', (size_t)(end - p) < 512 ? (size_t)(end - p) : 512);
        if (close && close + 1 < end && close[1] == ' ' && !memchr(p, ' ', (size_t)(close - p)))
            p = close + 2;
    }
    if (end - p > 20 && p[4] == '-' && p[7] == '-' && p[10] == 'T' &&
        isdigit((unsigned char)p[0])) {
        const char *sp = memchr(p, ' ', (size_t)(end - p) < 64 ? (size_t)(end - p) : 64);
        if (sp && sp + 1 < end && sp[1] == '{')
            p = sp + 1;
    }
    if (p != *line && p < end && *p == '{') {
        *len -= (size_t)(p - *line);
        *line = p;
    }
}

gq_code cli_audit_parse_line(const char *line, size_t len, gq_audit_entry *out, gq_err *err)
{
    /* Never read back: the pod objects of Events logged at Request level and
     * the bulky trees of our own records. Still checked, never built. */
    static const char *const skip[] = {"requestObject", "responseObject", GQ_AUDIT_F_REQUEST,
                                       GQ_AUDIT_F_REWRITE, GQ_AUDIT_F_QUOTAS};
    json_object *root = NULL;
    gq_audit_entry e;
    gq_code rc;
    memset(&e, 0, sizeof(e));
    if (len > CLI_AUDIT_LINE_MAX)
        return gq_err_set(err, GQ_ELIMIT, "line longer than %zu bytes", CLI_AUDIT_LINE_MAX);
    if (len && line[len - 1] == '\r')
        len--;
    strip_kubectl_prefix(&line, &len);
    if ((rc = gq_json_parse_pruned(line, len, GQ_JSON_DEFAULT_DEPTH, skip,
                                   sizeof(skip) / sizeof(skip[0]), &root, err)))
        goto out;
    if (!json_object_is_type(root, json_type_object)) {
        rc = gq_err_set(err, GQ_ENOTFOUND, "not a JSON object");
        goto out;
    }
    const char *kind = gq_json_get_string(root, "kind"),
               *api = gq_json_get_string(root, "apiVersion");
    if (kind && api && !strcmp(kind, "Event") && !strncmp(api, "audit.k8s.io/", 13))
        rc = parse_event(root, &e, err);
    else if (gq_json_get_string(root, "webhook") && gq_json_get_string(root, "decision"))
        rc = gq_audit_record_parse(root, &e, err);
    else
        rc = gq_err_set(err, GQ_ENOTFOUND, "neither a gpuquota audit record nor an audit Event");
out:
    json_object_put(root);
    if (rc)
        gq_audit_entry_dispose(&e);
    else
        *out = e;
    return rc;
}

gq_code cli_audit_parse_since(const char *s, int64_t now, int64_t *out, gq_err *err)
{
    if (!s || !*s)
        return gq_err_set(err, GQ_EINVAL, "--since: empty");
    if (strchr(s, 'T') || strchr(s, '-')) {
        int64_t t;
        if (gq_time_parse_rfc3339(s, &t, NULL) != GQ_OK)
            return gq_err_set(err, GQ_EINVAL,
                              "--since %.64s: not an RFC 3339 time (2026-01-02T15:04:05Z)", s);
        *out = t;
        return GQ_OK;
    }
    int64_t total = 0;
    const char *p = s;
    while (*p) {
        int64_t n = 0, unit;
        const char *start = p;
        while (*p >= '0' && *p <= '9') {
            if (__builtin_mul_overflow(n, 10, &n) || __builtin_add_overflow(n, *p - '0', &n))
                return gq_err_set(err, GQ_ERANGE, "--since %.64s: too large", s);
            p++;
        }
        switch (*p) {
        case 's':
            unit = 1;
            break;
        case 'm':
            unit = 60;
            break;
        case 'h':
            unit = 3600;
            break;
        case 'd':
            unit = 86400;
            break;
        default:
            unit = 0;
        }
        if (p == start || !unit)
            return gq_err_set(err, GQ_EINVAL,
                              "--since %.64s: not a duration (90m, 2h, 7d, 1h30m) or RFC 3339 time",
                              s);
        p++;
        if (__builtin_mul_overflow(n, unit, &n) || __builtin_add_overflow(total, n, &total))
            return gq_err_set(err, GQ_ERANGE, "--since %.64s: too large", s);
    }
    if (__builtin_sub_overflow(now, total, out))
        return gq_err_set(err, GQ_ERANGE, "--since %.64s: too large", s);
    return GQ_OK;
}

static bool str_eq(const char *a, const char *b)
{
    return a && b && !strcmp(a, b);
}

bool cli_audit_matches(const gq_audit_entry *e, const cli_audit_filter *f)
{
    if (!f)
        return true;
    if (f->has_since && (!e->has_time || e->t < f->since))
        return false;
    if (f->namespace_ && !str_eq(e->namespace_, f->namespace_))
        return false;
    if (f->user && !str_eq(e->user, f->user))
        return false;
    if (f->webhook && !str_eq(e->webhook, f->webhook))
        return false;
    if (f->denied_only && e->decision != GQ_AUDIT_DENIED)
        return false;
    if (f->tenant) {
        if (!e->namespace_)
            return false;
        json_object *labels = NULL;
        for (size_t i = 0; i < f->n_ns; i++)
            if (str_eq(f->ns_names[i], e->namespace_))
                labels = f->ns_labels[i];
        if (!gq_quota_covers_namespace(f->tenant, e->namespace_, labels))
            return false;
    }
    return true;
}

void cli_audit_charge_text(const gq_audit_entry *e, char *buf, size_t cap)
{
    /* The order our webhooks write it in. */
    static const gq_qkey order[] = {GQ_KEY_GPU_MEMORY, GQ_KEY_GPUS, GQ_KEY_GPU_PODS};
    size_t len = 0;
    buf[0] = '\0';
    if (!e->has_charge)
        return;
    for (size_t i = 0; i < 3; i++) {
        if (!e->charge.set[order[i]])
            continue;
        char q[GQ_QUANTITY_STR_MAX];
        gq_amount_format(&e->charge, order[i], q);
        int n =
            snprintf(buf + len, cap - len, "%s%s=%s", len ? "," : "", gq_qkey_name(order[i]), q);
        if (n < 0 || (size_t)n >= cap - len)
            return; /* truncated, still NUL-terminated */
        len += (size_t)n;
    }
}

void cli_audit_entry_to_json(const gq_audit_entry *e, gq_buf *b)
{
    gq_buf_puts(b, e->source == GQ_AUDIT_SRC_APISERVER ? "{\"source\":\"kube-apiserver\""
                                                       : "{\"source\":\"gpuquota\"");
    static const char *const keys[] = {
        ",\"time\":",      ",\"uid\":",  ",\"webhook\":", ",\"operation\":",
        ",\"namespace\":", ",\"name\":", ",\"user\":"};
    const char *vals[] = {e->time,       e->uid,  e->webhook, e->operation,
                          e->namespace_, e->name, e->user};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        gq_buf_puts(b, keys[i]);
        gq_buf_json_string(b, vals[i]);
    }
    gq_buf_puts(b, e->dry_run ? ",\"dryRun\":true" : ",\"dryRun\":false");
    gq_buf_puts(b, ",\"decision\":");
    gq_buf_json_string(b, gq_audit_decision_name(e->decision));
    gq_buf_puts(b, ",\"reason\":");
    gq_buf_json_string(b, e->reason);
    if (e->source == GQ_AUDIT_SRC_APISERVER)
        gq_buf_printf(b, ",\"code\":%d", e->code);
    if (e->has_charge) {
        json_object *c = gq_amounts_to_json(&e->charge);
        if (!c) {
            gq_buf_fail(b, GQ_ENOMEM);
            return;
        }
        gq_buf_puts(b, ",\"charge\":");
        gq_buf_puts(b, gq_json_compact(c));
        json_object_put(c);
    }
    gq_buf_puts(b, "}");
}

/* ---- summary ------------------------------------------------------------ */

void cli_audit_summary_init(cli_audit_summary *s)
{
    memset(s, 0, sizeof(*s));
}

static void ns_dispose(cli_audit_ns_summary *n)
{
    free(n->namespace_);
    free(n->reasons);
}

void cli_audit_summary_dispose(cli_audit_summary *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_ns; i++)
        ns_dispose(&s->ns[i]);
    free(s->ns);
    ns_dispose(&s->total);
    memset(s, 0, sizeof(*s));
}

static void reason_key(const char *reason, char key[CLI_AUDIT_REASON_KEY_MAX])
{
    /* The first ", " outside quotes and brackets: "must be in (0, 1]" is
     * one phrase, "exceeded quota: team-a, requested: ..." two. */
    const char *r = reason ? reason : "";
    size_t n = 0;
    int depth = 0;
    bool quoted = false;
    for (; r[n] && !(r[n] == ',' && r[n + 1] == ' ' && !depth && !quoted); n++) {
        if (r[n] == '"')
            quoted = !quoted;
        else if (!quoted && (r[n] == '(' || r[n] == '['))
            depth++;
        else if (!quoted && (r[n] == ')' || r[n] == ']') && depth > 0)
            depth--;
    }
    if (n >= CLI_AUDIT_REASON_KEY_MAX)
        n = CLI_AUDIT_REASON_KEY_MAX - 1;
    memcpy(key, r, n);
    key[n] = '\0';
}

static gq_code ns_add(cli_audit_ns_summary *n, const gq_audit_entry *e, const char *key)
{
    if (e->decision == GQ_AUDIT_ALLOWED)
        n->admitted++;
    else if (e->decision == GQ_AUDIT_ERROR)
        n->errors++;
    else
        n->denied++;
    if (e->decision == GQ_AUDIT_ALLOWED && !e->dry_run && e->has_charge &&
        str_eq(e->webhook, "validate") && e->charge.set[GQ_KEY_GPU_MEMORY] &&
        (e->source == GQ_AUDIT_SRC_GPUQUOTA || e->code < 400) &&
        __builtin_add_overflow(n->charged_bytes, e->charge.v[GQ_KEY_GPU_MEMORY], &n->charged_bytes))
        n->charged_overflow = true;
    if (e->decision != GQ_AUDIT_DENIED)
        return GQ_OK;
    for (size_t i = 0; i < n->n_reasons; i++)
        if (!strcmp(n->reasons[i].text, key)) {
            n->reasons[i].count++;
            return GQ_OK;
        }
    if (n->n_reasons == CLI_AUDIT_REASONS_MAX) {
        n->other_reasons++;
        return GQ_OK;
    }
    cli_audit_reason *r = realloc(n->reasons, (n->n_reasons + 1) * sizeof(*r));
    if (!r)
        return GQ_ENOMEM;
    n->reasons = r;
    memcpy(r[n->n_reasons].text, key, CLI_AUDIT_REASON_KEY_MAX);
    r[n->n_reasons++].count = 1;
    return GQ_OK;
}

gq_code cli_audit_summary_add(cli_audit_summary *s, const gq_audit_entry *e)
{
    const char *ns = e->namespace_ ? e->namespace_ : "";
    cli_audit_ns_summary *n = NULL;
    for (size_t i = 0; i < s->n_ns && !n; i++)
        if (!strcmp(s->ns[i].namespace_, ns))
            n = &s->ns[i];
    if (!n) {
        cli_audit_ns_summary *p = gq_grow(s->ns, &s->cap, s->n_ns, sizeof(*p), 16);
        if (!p)
            return GQ_ENOMEM;
        s->ns = p;
        n = &s->ns[s->n_ns];
        memset(n, 0, sizeof(*n));
        if (!(n->namespace_ = strdup(ns)))
            return GQ_ENOMEM;
        s->n_ns++;
    }
    char key[CLI_AUDIT_REASON_KEY_MAX];
    reason_key(e->reason, key);
    gq_code rc = ns_add(n, e, key);
    if (!rc)
        rc = ns_add(&s->total, e, key);
    return rc;
}

static int cmp_ns(const void *a, const void *b)
{
    return strcmp(((const cli_audit_ns_summary *)a)->namespace_,
                  ((const cli_audit_ns_summary *)b)->namespace_);
}

static int cmp_reason(const void *a, const void *b)
{
    const cli_audit_reason *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return strcmp(x->text, y->text);
}

void cli_audit_summary_finish(cli_audit_summary *s)
{
    if (s->n_ns > 1)
        qsort(s->ns, s->n_ns, sizeof(*s->ns), cmp_ns);
    for (size_t i = 0; i < s->n_ns; i++)
        if (s->ns[i].n_reasons > 1)
            qsort(s->ns[i].reasons, s->ns[i].n_reasons, sizeof(cli_audit_reason), cmp_reason);
    if (s->total.n_reasons > 1)
        qsort(s->total.reasons, s->total.n_reasons, sizeof(cli_audit_reason), cmp_reason);
}
