/* YAML to json-c, event by event (libyaml's parser; no document tree is
 * built twice). See yamljson.h for the rules. */
#include "common/yamljson.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "common/jsonutil.h"

/* Nodes in one stream: bounds memory long before the byte cap would. */
#define MAX_NODES (1u << 18)
#define TAG_STR "tag:yaml.org,2002:str"

typedef struct frame {
    json_object *obj; /* borrowed: owned by its parent or by the builder's root */
    bool is_map;
    char *key; /* pending mapping key, owned */
} frame;

typedef struct builder {
    const char *file;
    json_object *root;
    bool have_root;
    yaml_mark_t doc_start; /* where the current document begins */
    frame stack[GQ_YAML_MAX_DEPTH];
    size_t depth;
    size_t nodes;
    json_object **docs;
    size_t n_docs;
    gq_err *err;
} builder;

static gq_code at(builder *b, gq_code code, const yaml_mark_t *m, const char *what)
{
    return gq_err_set(b->err, code, "%s:%zu: %s", b->file, m->line + 1, what);
}

/* ---- scalar resolution (YAML 1.2 core schema) --------------------------- */

static bool is_one_of(const char *s, const char *const *words)
{
    for (; *words; words++)
        if (!strcmp(s, *words))
            return true;
    return false;
}

static bool all_digits(const char *s, const char *set)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!strchr(set, *s))
            return false;
    return true;
}

/* Number of decimal digits at s. */
static size_t n_digits(const char *s)
{
    size_t n = 0;
    while (s[n] >= '0' && s[n] <= '9')
        n++;
    return n;
}

/* True when s is an optional exponent ([eE][-+]?[0-9]+) and nothing after. */
static bool exponent_ends(const char *s)
{
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '-' || *s == '+')
            s++;
        size_t d = n_digits(s);
        if (!d)
            return false;
        s += d;
    }
    return *s == '\0';
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static bool is_core_float(const char *s)
{
    s += *s == '-' || *s == '+';
    size_t d = n_digits(s);
    s += d;
    if (*s == '.') {
        size_t f = n_digits(++s);
        if (!d && !f)
            return false;
        s += f;
    } else if (!d) {
        return false;
    }
    return exponent_ends(s);
}

/* JSON's number grammar, so a number keeps its text only when that text is
 * valid JSON (json-c prints the kept text verbatim). */
static bool is_json_number(const char *s)
{
    s += *s == '-';
    size_t d = n_digits(s);
    if (!d || (s[0] == '0' && d > 1))
        return false;
    s += d;
    if (*s == '.') {
        size_t f = n_digits(++s);
        if (!f)
            return false;
        s += f;
    }
    return exponent_ends(s);
}

static json_object *new_number_text(double d, const char *s)
{
    return is_json_number(s) ? json_object_new_double_s(d, s) : json_object_new_double(d);
}

/* Resolve a plain scalar. Returns GQ_OK with *out set (NULL = JSON null). */
static gq_code resolve_plain(builder *b, const char *s, size_t len, const yaml_mark_t *m,
                             json_object **out)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"true", "True", "TRUE", NULL};
    static const char *const falses[] = {"false", "False", "FALSE", NULL};
    static const char *const specials[] = {".inf",  ".Inf",  ".INF",  "+.inf", "+.Inf",
                                           "+.INF", "-.inf", "-.Inf", "-.INF", ".nan",
                                           ".NaN",  ".NAN",  NULL};
    json_object *v = NULL;
    if (strlen(s) != len) /* a NUL inside: only a quoted scalar can hold it */
        v = json_object_new_string_len(s, (int)len);
    else if (is_one_of(s, nulls)) {
        *out = NULL;
        return GQ_OK;
    } else if (is_one_of(s, trues) || is_one_of(s, falses)) {
        v = json_object_new_boolean(is_one_of(s, trues));
    } else if (is_one_of(s, specials)) {
        return at(b, GQ_EINVAL, m, "infinity and NaN cannot be represented in JSON");
    } else if (all_digits(s + (s[0] == '-' || s[0] == '+'), "0123456789")) {
        errno = 0;
        long long n = strtoll(s, NULL, 10);
        if (errno == ERANGE) /* beyond int64: a JSON number with the text kept */
            v = new_number_text(strtod(s, NULL), s);
        else
            v = json_object_new_int64(n);
    } else if ((s[0] == '0' && s[1] == 'x' && all_digits(s + 2, "0123456789abcdefABCDEF")) ||
               (s[0] == '0' && s[1] == 'o' && all_digits(s + 2, "01234567"))) {
        errno = 0;
        long long n = strtoll(s + 2, NULL, s[1] == 'x' ? 16 : 8);
        if (errno == ERANGE)
            return at(b, GQ_EINVAL, m, "integer too large");
        v = json_object_new_int64(n);
    } else if (is_core_float(s)) {
        double d = strtod(s, NULL);
        if (!isfinite(d))
            return at(b, GQ_EINVAL, m, "number too large");
        v = new_number_text(d, s);
    } else {
        v = json_object_new_string_len(s, (int)len);
    }
    if (!v)
        return at(b, GQ_ENOMEM, m, "out of memory");
    *out = v;
    return GQ_OK;
}

/* ---- tree building ------------------------------------------------------ */

/* Place v (owned; NULL = JSON null) at the current position. */
static gq_code place(builder *b, json_object *v, const yaml_mark_t *m)
{
    if (++b->nodes > MAX_NODES) {
        json_object_put(v);
        return at(b, GQ_ELIMIT, m, "too many nodes");
    }
    if (b->depth == 0) {
        b->root = v;
        b->have_root = true;
        return GQ_OK;
    }
    frame *f = &b->stack[b->depth - 1];
    if (!f->is_map) {
        if (json_object_array_add(f->obj, v)) {
            json_object_put(v);
            return at(b, GQ_ENOMEM, m, "out of memory");
        }
        return GQ_OK;
    }
    int rc = json_object_object_add(f->obj, f->key, v);
    free(f->key);
    f->key = NULL;
    if (rc) {
        json_object_put(v);
        return at(b, GQ_ENOMEM, m, "out of memory");
    }
    return GQ_OK;
}

static bool expecting_key(const builder *b)
{
    return b->depth > 0 && b->stack[b->depth - 1].is_map && !b->stack[b->depth - 1].key;
}

static gq_code on_scalar(builder *b, const yaml_event_t *e)
{
    const char *s = (const char *)e->data.scalar.value;
    size_t len = e->data.scalar.length;
    const yaml_mark_t *m = &e->start_mark;
    if (expecting_key(b)) {
        frame *f = &b->stack[b->depth - 1];
        if (strlen(s) != len)
            return at(b, GQ_EINVAL, m, "a mapping key contains a NUL character");
        if (json_object_object_get_ex(f->obj, s, NULL)) {
            char msg[160];
            snprintf(msg, sizeof(msg), "duplicate mapping key \"%.100s\"", s);
            return at(b, GQ_EINVAL, m, msg);
        }
        if (!(f->key = strdup(s)))
            return at(b, GQ_ENOMEM, m, "out of memory");
        return GQ_OK;
    }
    const char *tag = (const char *)e->data.scalar.tag;
    json_object *v = NULL;
    if (e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !(tag && !strcmp(tag, TAG_STR)) &&
        !(tag && !strcmp(tag, "!"))) {
        gq_code rc = resolve_plain(b, s, len, m, &v);
        if (rc)
            return rc;
    } else if (!(v = json_object_new_string_len(s, (int)len))) {
        return at(b, GQ_ENOMEM, m, "out of memory");
    }
    return place(b, v, m);
}

static gq_code on_start(builder *b, const yaml_event_t *e, bool is_map)
{
    const yaml_mark_t *m = &e->start_mark;
    if (expecting_key(b))
        return at(b, GQ_EINVAL, m, "mapping keys must be scalars");
    if (b->depth == GQ_YAML_MAX_DEPTH)
        return at(b, GQ_ELIMIT, m, "nesting too deep");
    json_object *v = is_map ? json_object_new_object() : json_object_new_array();
    if (!v)
        return at(b, GQ_ENOMEM, m, "out of memory");
    gq_code rc = place(b, v, m); /* the parent (or root) owns v from here */
    if (rc)
        return rc;
    b->stack[b->depth++] = (frame){v, is_map, NULL};
    return GQ_OK;
}

static gq_code on_doc_end(builder *b, const yaml_event_t *e)
{
    if (!b->have_root || !b->root) /* empty document */
        return GQ_OK;
    if (b->n_docs == GQ_YAML_MAX_DOCS)
        return at(b, GQ_ELIMIT, &b->doc_start, "too many documents");
    json_object **nd = realloc(b->docs, (b->n_docs + 1) * sizeof(*nd));
    if (!nd)
        return at(b, GQ_ENOMEM, &e->start_mark, "out of memory");
    b->docs = nd;
    b->docs[b->n_docs++] = b->root;
    b->root = NULL;
    b->have_root = false;
    return GQ_OK;
}

static gq_code on_event(builder *b, const yaml_event_t *e)
{
    switch (e->type) {
    case YAML_DOCUMENT_START_EVENT:
        b->root = NULL;
        b->have_root = false;
        b->depth = 0;
        b->doc_start = e->end_mark;
        return GQ_OK;
    case YAML_DOCUMENT_END_EVENT:
        return on_doc_end(b, e);
    case YAML_ALIAS_EVENT:
        return at(b, GQ_EINVAL, &e->start_mark, "aliases (*name) are not supported");
    case YAML_SCALAR_EVENT:
        if (e->data.scalar.anchor)
            return at(b, GQ_EINVAL, &e->start_mark, "anchors (&name) are not supported");
        return on_scalar(b, e);
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        const yaml_char_t *anchor = e->type == YAML_SEQUENCE_START_EVENT
                                        ? e->data.sequence_start.anchor
                                        : e->data.mapping_start.anchor;
        if (anchor)
            return at(b, GQ_EINVAL, &e->start_mark, "anchors (&name) are not supported");
        return on_start(b, e, e->type == YAML_MAPPING_START_EVENT);
    }
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        if (b->depth)
            b->depth--;
        return GQ_OK;
    default:
        return GQ_OK;
    }
}

static void builder_dispose(builder *b)
{
    for (size_t i = 0; i < b->depth; i++)
        free(b->stack[i].key);
    json_object_put(b->root);
    gq_yaml_docs_free(b->docs, b->n_docs);
}

static gq_code load_yaml(const char *buf, size_t len, builder *b)
{
    yaml_parser_t p;
    yaml_event_t e;
    gq_code rc = GQ_OK;
    bool done = false;
    if (!yaml_parser_initialize(&p))
        return gq_err_set(b->err, GQ_ENOMEM, "%s: out of memory", b->file);
    yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
    while (!done && !rc) {
        if (!yaml_parser_parse(&p, &e)) {
            rc = gq_err_set(b->err, p.error == YAML_MEMORY_ERROR ? GQ_ENOMEM : GQ_EINVAL,
                            "%s:%zu: %s%s%s", b->file, p.problem_mark.line + 1,
                            p.problem ? p.problem : "invalid YAML", p.context ? " " : "",
                            p.context ? p.context : "");
            break;
        }
        done = e.type == YAML_STREAM_END_EVENT;
        rc = on_event(b, &e);
        yaml_event_delete(&e);
    }
    yaml_parser_delete(&p);
    return rc;
}

/* JSON fast path: the whole buffer must be one JSON object (strict, finite
 * numbers, depth capped); anything else falls back to the YAML parser. */
static json_object *load_json(const char *buf, size_t len)
{
    json_object *v = NULL;
    if (gq_json_parse(buf, len, GQ_YAML_MAX_DEPTH, &v, NULL))
        return NULL;
    return v;
}

gq_code gq_yaml_load(const char *buf, size_t len, const char *filename, json_object ***docs,
                     size_t *n_docs, gq_err *err)
{
    builder b = {.file = filename ? filename : "<input>", .err = err};
    gq_code rc = GQ_OK;
    if (!buf || !docs || !n_docs)
        return gq_err_set(err, GQ_EINVAL, "%s: no input", b.file);
    if (len > GQ_YAML_MAX_BYTES)
        return gq_err_set(err, GQ_ELIMIT, "%s: larger than %u bytes", b.file, GQ_YAML_MAX_BYTES);
    size_t i = 0;
    while (i < len && strchr(" \t\r\n", buf[i]) && buf[i])
        i++;
    if (i < len && buf[i] == '{') {
        json_object *v = load_json(buf, len);
        if (v) {
            json_object **d = malloc(sizeof(*d));
            if (!d) {
                json_object_put(v);
                return gq_err_set(err, GQ_ENOMEM, "%s: out of memory", b.file);
            }
            d[0] = v;
            *docs = d;
            *n_docs = 1;
            return GQ_OK;
        }
    }
    rc = load_yaml(buf, len, &b);
    if (rc) {
        builder_dispose(&b);
        return rc;
    }
    json_object_put(b.root); /* an unterminated last document cannot occur */
    *docs = b.docs;
    *n_docs = b.n_docs;
    return GQ_OK;
}

void gq_yaml_docs_free(json_object **docs, size_t n_docs)
{
    if (!docs)
        return;
    for (size_t i = 0; i < n_docs; i++)
        json_object_put(docs[i]);
    free(docs);
}
