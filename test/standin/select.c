/* Label and field selectors with the syntax kube-apiserver accepts. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

enum { OP_EQ, OP_NE, OP_IN, OP_NOTIN, OP_EXISTS, OP_NOTEXISTS, OP_GT, OP_LT };

#define SEL_VALS_MAX 64
#define SEL_REQS_MAX 64

typedef struct sel_req {
    char *key;
    int op;
    char *vals[SEL_VALS_MAX];
    size_t nvals;
} sel_req;

struct selector {
    sel_req reqs[SEL_REQS_MAX];
    size_t n;
};

void sel_free(selector *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->reqs[i].key);
        for (size_t j = 0; j < s->reqs[i].nvals; j++)
            free(s->reqs[i].vals[j]);
    }
    free(s);
}

int sel_empty(const selector *s)
{
    return !s || s->n == 0;
}

static int key_char(char c)
{
    return isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_' || c == '/';
}

static void skip_ws(const char **p)
{
    while (**p == ' ' || **p == '\t')
        (*p)++;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Read a key or value token (label syntax chars). */
static char *token(const char **p)
{
    const char *s = *p;
    while (key_char(**p))
        (*p)++;
    return dup_n(s, (size_t)(*p - s));
}

static gq_code add_val(sel_req *r, char *v, gq_err *err)
{
    if (!v)
        return gq_err_oom(err);
    if (r->nvals == SEL_VALS_MAX) {
        free(v);
        return gq_err_set(err, GQ_ELIMIT, "too many values in selector");
    }
    r->vals[r->nvals++] = v;
    return GQ_OK;
}

/* Allocate an empty selector after checking the input's size. */
static gq_code sel_new(const char *s, selector **out, gq_err *err)
{
    if (s && strlen(s) > SI_SEL_MAX)
        return gq_err_set(err, GQ_ELIMIT, "selector too long");
    *out = calloc(1, sizeof **out);
    return *out ? GQ_OK : gq_err_oom(err);
}

/* The next free requirement slot, cleared; NULL when the selector is full. */
static sel_req *next_req(selector *sel, gq_err *err)
{
    if (sel->n == SEL_REQS_MAX) {
        gq_err_set(err, GQ_ELIMIT, "too many requirements in selector");
        return NULL;
    }
    sel_req *r = &sel->reqs[sel->n];
    memset(r, 0, sizeof *r);
    return r;
}

gq_code sel_parse_labels(const char *s, selector **out, gq_err *err)
{
    selector *sel = NULL;
    gq_code rc = sel_new(s, &sel, err);
    if (rc)
        return rc;
    const char *p = s ? s : "";
    skip_ws(&p);
    while (*p) {
        sel_req *r = next_req(sel, err);
        if (!r) {
            rc = GQ_ELIMIT;
            goto out;
        }
        int neg = 0;
        skip_ws(&p);
        if (*p == '!') {
            neg = 1;
            p++;
            skip_ws(&p);
        }
        r->key = token(&p);
        sel->n++;
        if (!r->key) {
            rc = gq_err_oom(err);
            goto out;
        }
        if (!*r->key) {
            rc = gq_err_set(err, GQ_EINVAL,
                            "unable to parse requirement: found '%c', expected: !, identifier, or "
                            "'end of string'",
                            *p ? *p : ' ');
            goto out;
        }
        skip_ws(&p);
        if (neg) {
            r->op = OP_NOTEXISTS;
        } else if (*p == ',' || !*p) {
            r->op = OP_EXISTS;
        } else if (p[0] == '=' || p[0] == '!' || p[0] == '>' || p[0] == '<') {
            if (p[0] == '=' && p[1] == '=')
                r->op = OP_EQ, p += 2;
            else if (p[0] == '=')
                r->op = OP_EQ, p += 1;
            else if (p[0] == '!' && p[1] == '=')
                r->op = OP_NE, p += 2;
            else if (p[0] == '>')
                r->op = OP_GT, p += 1;
            else if (p[0] == '<')
                r->op = OP_LT, p += 1;
            else {
                rc = gq_err_set(err, GQ_EINVAL,
                                "unable to parse requirement: found '!', expected: '='");
                goto out;
            }
            skip_ws(&p);
            rc = add_val(r, token(&p), err);
            if (rc)
                goto out;
            if ((r->op == OP_GT || r->op == OP_LT) && !*r->vals[0]) {
                rc = gq_err_set(err, GQ_EINVAL,
                                "unable to parse requirement: for 'gt', 'lt' operators, exactly "
                                "one value is required");
                goto out;
            }
        } else if (!strncmp(p, "in", 2) || !strncmp(p, "notin", 5)) {
            int notin = p[0] == 'n';
            r->op = notin ? OP_NOTIN : OP_IN;
            p += notin ? 5 : 2;
            skip_ws(&p);
            if (*p != '(') {
                rc = gq_err_set(err, GQ_EINVAL,
                                "unable to parse requirement: found '%c', expected: '('",
                                *p ? *p : ' ');
                goto out;
            }
            p++;
            for (;;) {
                skip_ws(&p);
                rc = add_val(r, token(&p), err);
                if (rc)
                    goto out;
                skip_ws(&p);
                if (*p == ',') {
                    p++;
                    continue;
                }
                if (*p == ')') {
                    p++;
                    break;
                }
                rc = gq_err_set(err, GQ_EINVAL,
                                "unable to parse requirement: found '%c', expected: ',', or ')'",
                                *p ? *p : ' ');
                goto out;
            }
        } else {
            rc = gq_err_set(
                err, GQ_EINVAL,
                "unable to parse requirement: found '%c', expected: in, notin, =, ==, !=, gt, lt",
                *p);
            goto out;
        }
        skip_ws(&p);
        if (*p == ',') {
            p++;
            skip_ws(&p);
            if (!*p) {
                rc = gq_err_set(
                    err, GQ_EINVAL,
                    "unable to parse requirement: found '', expected: identifier after ','");
                goto out;
            }
        } else if (*p) {
            rc = gq_err_set(err, GQ_EINVAL, "found '%c', expected: ',' or 'end of string'", *p);
            goto out;
        }
    }
    *out = sel;
    sel = NULL;
out:
    sel_free(sel);
    return rc;
}

static int field_ok(const char *key, const rtype *t)
{
    if (!strcmp(key, "metadata.name") || !strcmp(key, "metadata.namespace"))
        return 1;
    for (size_t i = 0; i < sizeof t->field_labels / sizeof t->field_labels[0]; i++)
        if (t->field_labels[i] && !strcmp(t->field_labels[i], key))
            return 1;
    return 0;
}

/* Field selector values may escape ',', '=', '!' and '\' with a backslash. */
static char *field_token(const char **p, int stop_at_op)
{
    gq_buf b;
    gq_buf_init(&b, SI_TEXT_MAX);
    gq_buf_add(&b, "", 0);
    while (**p && **p != ',') {
        if (stop_at_op && (**p == '=' || **p == '!'))
            break;
        if (**p == '\\' && (*p)[1]) {
            (*p)++;
        }
        gq_buf_add(&b, *p, 1);
        (*p)++;
    }
    return si_buf_take(&b);
}

gq_code sel_parse_fields(const char *s, const rtype *t, selector **out, gq_err *err)
{
    selector *sel = NULL;
    gq_code rc = sel_new(s, &sel, err);
    if (rc)
        return rc;
    const char *p = s ? s : "";
    while (*p) {
        sel_req *r = next_req(sel, err);
        if (!r) {
            rc = GQ_ELIMIT;
            goto out;
        }
        r->key = field_token(&p, 1);
        sel->n++;
        if (!r->key) {
            rc = gq_err_oom(err);
            goto out;
        }
        if (p[0] == '!' && p[1] == '=')
            r->op = OP_NE, p += 2;
        else if (p[0] == '=' && p[1] == '=')
            r->op = OP_EQ, p += 2;
        else if (p[0] == '=')
            r->op = OP_EQ, p += 1;
        else {
            rc = gq_err_set(err, GQ_EINVAL, "invalid selector: '%s'; can't understand '%s'", s,
                            r->key);
            goto out;
        }
        rc = add_val(r, field_token(&p, 0), err);
        if (rc)
            goto out;
        if (!field_ok(r->key, t)) {
            rc = gq_err_set(err, GQ_EINVAL, "field label not supported: %s", r->key);
            goto out;
        }
        if (*p == ',')
            p++;
    }
    *out = sel;
    sel = NULL;
out:
    sel_free(sel);
    return rc;
}

static int parse_ll(const char *s, long long *v)
{
    char *end;
    if (!*s)
        return -1;
    *v = strtoll(s, &end, 10);
    return *end ? -1 : 0;
}

static int req_match(const sel_req *r, const char *have)
{
    switch (r->op) {
    case OP_EXISTS:
        return have != NULL;
    case OP_NOTEXISTS:
        return have == NULL;
    case OP_EQ:
        return have && !strcmp(have, r->vals[0]);
    case OP_NE:
        return !have || strcmp(have, r->vals[0]) != 0;
    case OP_IN:
    case OP_NOTIN: {
        int in = 0;
        for (size_t i = 0; have && i < r->nvals; i++)
            if (!strcmp(have, r->vals[i]))
                in = 1;
        return r->op == OP_IN ? in : !in;
    }
    case OP_GT:
    case OP_LT: {
        long long a, b;
        if (!have || parse_ll(have, &a) || parse_ll(r->vals[0], &b))
            return 0;
        return r->op == OP_GT ? a > b : a < b;
    }
    }
    return 0;
}

int sel_match_labels(const selector *s, json_object *obj)
{
    json_object *labels = si_obj(si_obj(obj, "metadata"), "labels");
    for (size_t i = 0; s && i < s->n; i++) {
        json_object *v = si_obj(labels, s->reqs[i].key);
        const char *have =
            v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
        if (!req_match(&s->reqs[i], have))
            return 0;
    }
    return 1;
}

int sel_match_fields(const selector *s, json_object *obj)
{
    for (size_t i = 0; s && i < s->n; i++) {
        /* Field selectors compare against the field's string form; an absent
         * field reads as "" (so spec.nodeName= selects unscheduled pods). */
        json_object *o = obj;
        const char *p = s->reqs[i].key;
        char part[128];
        while (o && *p) {
            const char *dot = strchr(p, '.');
            size_t n = dot ? (size_t)(dot - p) : strlen(p);
            if (n >= sizeof part) {
                o = NULL;
                break;
            }
            memcpy(part, p, n);
            part[n] = '\0';
            o = si_obj(o, part);
            p += n + (dot ? 1 : 0);
        }
        const char *have = "";
        if (o && json_object_is_type(o, json_type_string))
            have = json_object_get_string(o);
        else if (o && json_object_is_type(o, json_type_boolean))
            have = json_object_get_boolean(o) ? "true" : "false";
        if (!req_match(&s->reqs[i], have))
            return 0;
    }
    return 1;
}
