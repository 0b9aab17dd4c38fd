#include "common/jsonutil.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A recursive-descent parser that builds json-c objects directly. It
 * replaces json_tokener for three reasons: strict RFC 8259 with finite
 * numbers in one pass (json-c reads NaN, Infinity and 1e999), no UTF-8
 * validation (see jsonutil.h), and pruning: subtrees a caller never reads are
 * checked but never built, which is where an AdmissionReview's parse time
 * goes (managedFields alone is most of a pod's objects). Recursion depth is
 * bounded by max_depth; a pruned subtree is checked without recursion
 * (jp_skip), so its nesting is bounded only by the text's length: a pod's
 * managedFields, which a tenant may nest hundreds deep, never fails a
 * parse that prunes them. */

typedef struct jpat {
    const char *seg[GQ_JSON_SKIP_SEGMENTS];
    size_t len[GQ_JSON_SKIP_SEGMENTS];
    size_t n;
} jpat;

typedef struct jp {
    const char *start, *p, *end;
    int max_depth;
    jpat pat[GQ_JSON_MAX_SKIPS];
    size_t n_pat;
    bool index_patterns; /* some segment is neither "*" nor a member name */
    /* Per segment depth d: patterns with more than d segments, with "*" as
     * segment d, with exactly d + 1 segments; bit n of lens_at: some
     * pattern's segment d is n bytes long (longer ones never match). */
    uint64_t deeper[GQ_JSON_SKIP_SEGMENTS], star[GQ_JSON_SKIP_SEGMENTS];
    uint64_t last[GQ_JSON_SKIP_SEGMENTS], lens_at[GQ_JSON_SKIP_SEGMENTS];
    char *buf; /* scratch for decoded keys and strings with escapes */
    size_t cap;
    size_t built, max_tree; /* estimated bytes of the tree; cap (0: none) */
    gq_json_budget *budget; /* NULL: none */
    size_t charged;         /* taken from budget */
    gq_err *err;
    /* Streaming (gq_json_opts.each_member): the top-level object, whether
     * the next container is the streamed array, and that array. */
    const char *each_member;
    gq_json_each_fn each_fn;
    void *each_ud;
    json_object *root;
    bool stream_next;
    json_object *stream_arr;
} jp;

/* What json-c's objects cost on glibc (64-bit), measured with mallinfo2
 * over arrays of 10^5 values of each shape: an object with its 16-entry
 * hash table, an array with its first 32 slots, a scalar with its array
 * slot or hash entry; a member adds its key's copy. */
enum {
    JP_COST_OBJECT = 800,
    JP_COST_ARRAY = 152,
    JP_COST_MEMBER = 56,
    JP_COST_SCALAR = 72,
    JP_COST_STRING = 80,
};

/* Take the budget in steps, so that a small tree costs one atomic add. */
#define JP_BUDGET_STEP ((size_t)64 * 1024)

/* Count n more bytes of tree: GQ_ELIMIT past the tree's cap, GQ_EBUSY when
 * the budget shared with other trees has no room. */
static gq_code jp_charge(jp *j, size_t n)
{
    j->built += n;
    if (j->max_tree && j->built > j->max_tree)
        return gq_err_set(j->err, GQ_ELIMIT,
                          "the JSON decodes to more than %zu bytes of objects (at byte %zu)",
                          j->max_tree, (size_t)(j->p - j->start));
    if (!j->budget || j->built <= j->charged)
        return GQ_OK;
    size_t take = j->built - j->charged;
    take = take < JP_BUDGET_STEP ? JP_BUDGET_STEP : take;
    if (!gq_json_budget_take(j->budget, take))
        return gq_err_set(j->err, GQ_EBUSY,
                          "decoded requests in flight would hold more than %zu bytes; retry",
                          j->budget->cap);
    j->charged += take;
    return GQ_OK;
}

bool gq_json_budget_take(gq_json_budget *b, size_t n)
{
    size_t was = atomic_fetch_add_explicit(&b->used, n, memory_order_relaxed);
    if (was + n > b->cap || was + n < was) {
        atomic_fetch_sub_explicit(&b->used, n, memory_order_relaxed);
        return false;
    }
    return true;
}

void gq_json_budget_return(gq_json_budget *b, size_t n)
{
    if (b && n)
        atomic_fetch_sub_explicit(&b->used, n, memory_order_relaxed);
}

static gq_code jp_syntax(jp *j, const char *what)
{
    if (j->p >= j->end)
        return gq_err_set(j->err, GQ_EINVAL, "JSON text ends early (after %zu bytes)",
                          (size_t)(j->end - j->start));
    return gq_err_set(j->err, GQ_EINVAL, "JSON syntax error at byte %zu: %s",
                      (size_t)(j->p - j->start), what);
}

static gq_code jp_nomem(jp *j)
{
    return gq_err_oom(j->err);
}

static gq_code jp_nonfinite(jp *j)
{
    return gq_err_set(j->err, GQ_EINVAL, "JSON numbers must be finite (no NaN or Infinity)");
}

/* Bytes that end the fast scan of a string: quote, backslash, controls. */
static const unsigned char jp_stop[256] = {
    [0] = 1,  [1] = 1,  [2] = 1,  [3] = 1,  [4] = 1,  [5] = 1,   [6] = 1,    [7] = 1,  [8] = 1,
    [9] = 1,  [10] = 1, [11] = 1, [12] = 1, [13] = 1, [14] = 1,  [15] = 1,   [16] = 1, [17] = 1,
    [18] = 1, [19] = 1, [20] = 1, [21] = 1, [22] = 1, [23] = 1,  [24] = 1,   [25] = 1, [26] = 1,
    [27] = 1, [28] = 1, [29] = 1, [30] = 1, [31] = 1, ['"'] = 1, ['\\'] = 1,
};

static void jp_ws(jp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
        j->p++;
}

static gq_code jp_reserve(jp *j, size_t n)
{
    if (n <= j->cap)
        return GQ_OK;
    size_t cap = j->cap ? j->cap : 256;
    while (cap < n)
        cap *= 2;
    char *nb = realloc(j->buf, cap);
    if (!nb)
        return jp_nomem(j);
    j->buf = nb;
    j->cap = cap;
    return GQ_OK;
}

static int hex4(const char *s)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        v = v << 4 | d;
    }
    return v;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Past the bytes from q that need no look: up to a quote, a backslash, a
 * control character or end. */
static inline const char *jp_plain_run(const char *q, const char *end)
{
    /* Eight bytes at a time while none is a quote, backslash or control
     * character (SWAR: a byte is flagged when b < 0x20, b == '"' or
     * b == '\\'). */
    while (end - q >= 8) {
        uint64_t w;
        memcpy(&w, q, 8);
        const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
        uint64_t quote = w ^ (ones * '"'), bslash = w ^ (ones * '\\');
        /* Exact "some byte is < n" and "some byte is 0" tests: a word is
         * never passed over wrongly (a stray flag only ends the fast
         * loop early). */
        uint64_t hit = ((w - ones * 0x20) & ~w & high) | ((quote - ones) & ~quote & high) |
                       ((bslash - ones) & ~bslash & high);
        if (hit)
            break;
        q += 8;
    }
    while (q < end && !jp_stop[(unsigned char)*q])
        q++;
    return q;
}

/* The escape at *q (its backslash), checked: *q past it, or an error with
 * j->p where it is wrong. */
static inline gq_code jp_escape(jp *j, const char **q)
{
    const char *b = *q;
    if (b + 1 >= j->end) {
        j->p = b + 1;
        return jp_syntax(j, "unterminated string");
    }
    char e = b[1];
    if (e == 'u') {
        if (j->end - b < 6 || hex4(b + 2) < 0) {
            j->p = b;
            return jp_syntax(j, "invalid \\u escape");
        }
        *q = b + 6;
        return GQ_OK;
    }
    if (!strchr("\"\\/bfnrt", e) || !e) {
        j->p = b;
        return jp_syntax(j, "invalid escape");
    }
    *q = b + 2;
    return GQ_OK;
}

/* The closing quote of the string whose body starts at j->p, into *close;
 * *escaped when the body has an escape. Every escape is checked here, so
 * jp_unescape needs no bound of its own. */
static inline gq_code jp_string_close(jp *j, const char **close, bool *escaped)
{
    const char *q = j->p;
    for (;;) {
        q = jp_plain_run(q, j->end);
        if (q >= j->end) {
            j->p = q;
            return jp_syntax(j, "unterminated string");
        }
        unsigned char c = (unsigned char)*q;
        if (c == '"')
            break;
        if (c < 0x20) {
            j->p = q;
            return jp_syntax(j, "control character in string");
        }
        /* jp_stop stops at nothing else: a backslash. */
        *escaped = true;
        gq_code rc = jp_escape(j, &q);
        if (rc)
            return rc;
    }
    *close = q;
    return GQ_OK;
}

/* The code point of the checked \uXXXX whose hex digits are at *r (before
 * end), joined with a low surrogate that follows; *r past what it took. A
 * lone surrogate is U+FFFD. */
static inline unsigned jp_code_point(const char **r, const char *end)
{
    const char *h = *r;
    unsigned cp = (unsigned)hex4(h);
    h += 4;
    if (cp >= 0xd800 && cp <= 0xdbff && end - h >= 6 && h[0] == '\\' && h[1] == 'u') {
        int lo = hex4(h + 2);
        if (lo >= 0xdc00 && lo <= 0xdfff) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + ((unsigned)lo - 0xdc00);
            h += 6;
        }
    }
    *r = h;
    return cp >= 0xd800 && cp <= 0xdfff ? 0xfffd : cp;
}

/* Decode the checked string body [body, end) into o, NUL-terminated: its
 * length. Escapes never grow the text: \uXXXX (6 bytes) is at most 3 bytes
 * of UTF-8, a surrogate pair (12 bytes) 4. */
static size_t jp_unescape(char *o, const char *body, const char *end)
{
    char *start = o;
    for (const char *r = body; r < end;) {
        if (*r != '\\') {
            *o++ = *r++;
            continue;
        }
        char e = r[1];
        r += 2;
        switch (e) {
        case 'b':
            *o++ = '\b';
            break;
        case 'f':
            *o++ = '\f';
            break;
        case 'n':
            *o++ = '\n';
            break;
        case 'r':
            *o++ = '\r';
            break;
        case 't':
            *o++ = '\t';
            break;
        case 'u':
            o += put_utf8(o, jp_code_point(&r, end));
            break;
        default: /* " \ / */
            *o++ = e;
        }
    }
    *o = '\0';
    return (size_t)(o - start);
}

/* A string at j->p (the opening quote). With decode, *s and *n get its value:
 * borrowed from the input when it has no escapes, else decoded into j->buf
 * (NUL-terminated there). A lone surrogate decodes to U+FFFD, as Go's
 * decoder in kube-apiserver does. */
static gq_code jp_string(jp *j, bool decode, const char **s, size_t *n, bool *copied)
{
    const char *body = ++j->p, *close = NULL;
    bool escaped = false;
    gq_code rc = jp_string_close(j, &close, &escaped);
    if (rc)
        return rc;
    size_t raw = (size_t)(close - body);
    j->p = close + 1;
    if (!decode)
        return GQ_OK;
    *copied = escaped;
    if (!escaped) {
        *s = body;
        *n = raw;
        return GQ_OK;
    }
    if (jp_reserve(j, raw + 1))
        return GQ_ENOMEM;
    *n = jp_unescape(j->buf, body, close);
    *s = j->buf;
    return GQ_OK;
}

/* One or more digits at q: the end of them, or NULL (j->p at q). */
static const char *jp_digits(jp *j, const char *q)
{
    if (q >= j->end || *q < '0' || *q > '9') {
        j->p = q;
        return NULL;
    }
    while (q < j->end && *q >= '0' && *q <= '9')
        q++;
    return q;
}

/* The integer part at q (a digit, not past end): past it; *u its value
 * unless it does not fit (*overflow). */
static inline const char *jp_int_part(const char *q, const char *end, uint64_t *u, bool *overflow)
{
    if (*q == '0')
        return q + 1;
    for (; q < end && *q >= '0' && *q <= '9'; q++) {
        unsigned d = (unsigned)(*q - '0');
        if (*u > (UINT64_MAX - d) / 10)
            *overflow = true;
        else
            *u = *u * 10 + d;
    }
    return q;
}

/* A fraction and an exponent at q, if any: past them (*integral false
 * when there is either), or NULL with j->p where a digit is missing. */
static inline const char *jp_frac_exp(jp *j, const char *q, bool *integral)
{
    if (q < j->end && *q == '.') {
        *integral = false;
        if (!(q = jp_digits(j, q + 1)))
            return NULL;
    }
    if (q < j->end && (*q == 'e' || *q == 'E')) {
        *integral = false;
        q++;
        if (q < j->end && (*q == '+' || *q == '-'))
            q++;
        if (!(q = jp_digits(j, q)))
            return NULL;
    }
    return q;
}

/* An integer that fits int64 or uint64, as json-c would make it. */
static inline gq_code jp_integer(jp *j, bool neg, uint64_t u, json_object **out)
{
    if (!out)
        return GQ_OK;
    gq_code rc = jp_charge(j, JP_COST_SCALAR);
    if (rc)
        return rc;
    if (neg)
        *out = json_object_new_int64(u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u);
    else
        *out = u <= INT64_MAX ? json_object_new_int64((int64_t)u) : json_object_new_uint64(u);
    return *out ? GQ_OK : jp_nomem(j);
}

/* Any other number, the text b[0..n): a finite double. */
static gq_code jp_double(jp *j, const char *b, size_t n, json_object **out)
{
    if (jp_reserve(j, n + 1))
        return GQ_ENOMEM;
    memcpy(j->buf, b, n);
    j->buf[n] = '\0';
    double d = strtod(j->buf, NULL);
    if (!isfinite(d))
        return jp_nonfinite(j);
    if (!out)
        return GQ_OK;
    gq_code rc = jp_charge(j, JP_COST_STRING + n);
    if (rc)
        return rc;
    /* Keep the text as written, as json-c's own parser does. */
    *out = json_object_new_double_s(d, j->buf);
    return *out ? GQ_OK : jp_nomem(j);
}

static gq_code jp_number(jp *j, json_object **out)
{
    const char *b = j->p, *q = b;
    bool neg = false, integral = true;
    if (q < j->end && *q == '-') {
        neg = true;
        q++;
    }
    if (q < j->end && *q == 'I')
        return jp_nonfinite(j);
    if (q >= j->end || *q < '0' || *q > '9') {
        j->p = q;
        return jp_syntax(j, "invalid number");
    }
    uint64_t u = 0;
    bool overflow = false;
    q = jp_int_part(q, j->end, &u, &overflow);
    if (!(q = jp_frac_exp(j, q, &integral)))
        return jp_syntax(j, "invalid number");
    j->p = q;
    if (integral && !overflow && (!neg || u <= (uint64_t)INT64_MAX + 1))
        return jp_integer(j, neg, u, out);
    return jp_double(j, b, (size_t)(q - b), out);
}

/* true, false or null; a mismatch is reported where it is, in json-c's
 * words ("boolean expected", "null expected"), which logs already show. */
static gq_code jp_literal(jp *j, const char *word, size_t n)
{
    size_t k = 0;
    while (k < n && j->p + k < j->end && j->p[k] == word[k])
        k++;
    j->p += k;
    if (k == n)
        return GQ_OK;
    return jp_syntax(j, word[0] == 'n' ? "null expected" : "boolean expected");
}

/* Patterns among alive (matching the path so far, d segments) that go on
 * matching through one more segment seg[0..n) (an index when idx >= 0). */
static uint64_t jp_descend(const jp *j, uint64_t alive, size_t d, const char *seg, size_t n,
                           bool *skip)
{
    if (d >= GQ_JSON_SKIP_SEGMENTS)
        return 0;
    alive &= j->deeper[d];
    /* "*" matches without a look; most names match no other pattern, which
     * the set of segment lengths at this depth tells at once. */
    uint64_t next = alive & j->star[d], rest = alive & ~j->star[d];
    if (rest && n < 64 && (j->lens_at[d] >> n & 1)) {
        while (rest) {
            size_t i = (size_t)__builtin_ctzll(rest);
            rest &= rest - 1;
            if (j->pat[i].len[d] == n && !memcmp(j->pat[i].seg[d], seg, n))
                next |= (uint64_t)1 << i;
        }
    }
    if (next & j->last[d])
        *skip = true;
    return next;
}

static gq_code jp_value(jp *j, int depth, uint64_t alive, size_t d, json_object **out);

/* After a member or element: ',' (*more) or the closing bracket. */
static gq_code jp_after_item(jp *j, char close, bool *more)
{
    jp_ws(j);
    if (j->p < j->end && (*j->p == ',' || *j->p == close)) {
        *more = *j->p++ == ',';
        return GQ_OK;
    }
    return jp_syntax(j, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
}

/* The closing brackets jp_skip expects, innermost last. */
typedef struct jp_stack {
    char *close;
    size_t n, cap;
} jp_stack;

static inline gq_code jp_push(jp *j, jp_stack *st, char close)
{
    if (st->n == st->cap) {
        size_t ncap = st->cap ? 2 * st->cap : 64;
        char *ns = realloc(st->close, ncap);
        if (!ns)
            return jp_nomem(j);
        st->close = ns;
        st->cap = ncap;
    }
    st->close[st->n++] = close;
    return GQ_OK;
}

/* A string, literal or number at j->p (c its first byte), checked and
 * passed over. */
static inline gq_code jp_skip_scalar(jp *j, char c)
{
    const char *s;
    size_t len;
    bool copied;
    if (c == '"')
        return jp_string(j, false, &s, &len, &copied);
    if (c == 't' || c == 'f' || c == 'n')
        return jp_literal(j, c == 't' ? "true" : c == 'f' ? "false" : "null", c == 'f' ? 5 : 4);
    if (c == 'N' || c == 'I')
        return jp_nonfinite(j);
    if (c == '-' || (c >= '0' && c <= '9'))
        return jp_number(j, NULL);
    return jp_syntax(j, "unexpected character");
}

/* After a value: the containers that end here closed; *inside false when
 * none is left open (the skipped value is over), else the innermost goes
 * on with its next item. */
static inline gq_code jp_skip_closes(jp *j, jp_stack *st, bool *inside)
{
    for (; st->n; st->n--) {
        bool more = false;
        gq_code rc = jp_after_item(j, st->close[st->n - 1], &more);
        if (rc)
            return rc;
        if (more) {
            *inside = true;
            return GQ_OK;
        }
    }
    *inside = false;
    return GQ_OK;
}

/* "name": in a skipped object, checked and passed over. */
static inline gq_code jp_skip_name(jp *j)
{
    jp_ws(j);
    if (j->p >= j->end || *j->p != '"')
        return jp_syntax(j, "expected a member name");
    const char *s;
    size_t len;
    bool copied;
    gq_code rc = jp_string(j, false, &s, &len, &copied);
    if (rc)
        return rc;
    jp_ws(j);
    if (j->p >= j->end || *j->p != ':')
        return jp_syntax(j, "expected ':'");
    j->p++;
    return GQ_OK;
}

/* Check and pass over one value whose subtree is pruned, without recursion:
 * an explicit stack of the closing brackets expected, as deep as the text
 * nests (bounded by its length). Syntax and finite numbers are checked as
 * jp_value checks them. */
static gq_code jp_skip(jp *j)
{
    jp_stack st = {0};
    gq_code rc = GQ_OK;
    bool inside = false;
    for (;;) {
        /* A value. */
        jp_ws(j);
        if (j->p >= j->end) {
            rc = jp_syntax(j, "");
            break;
        }
        char c = *j->p;
        if (c == '{' || c == '[') {
            if ((rc = jp_push(j, &st, c == '{' ? '}' : ']')))
                break;
            j->p++;
            jp_ws(j);
            if (j->p < j->end && *j->p == st.close[st.n - 1]) {
                j->p++;
                st.n--;
            } else if (c == '{') {
                goto member;
            } else {
                continue; /* the first element */
            }
        } else if ((rc = jp_skip_scalar(j, c))) {
            break;
        }
        /* After a value: the enclosing container goes on or closes. */
        if ((rc = jp_skip_closes(j, &st, &inside)) || !inside)
            break;
        if (st.close[st.n - 1] == ']')
            continue; /* the next element */
    member:
        /* "name": in an object, then its value. */
        if ((rc = jp_skip_name(j)))
            break;
    }
    free(st.close);
    return rc;
}

/* One member "name": value of an object (obj NULL: checked, not built). */
static gq_code jp_member(jp *j, json_object *obj, int depth, uint64_t alive, size_t d)
{
    gq_code rc;
    jp_ws(j);
    if (j->p >= j->end || *j->p != '"')
        return jp_syntax(j, "expected a member name");
    const char *key = NULL;
    size_t klen = 0;
    bool copied = false, skip = false;
    if ((rc = jp_string(j, obj != NULL, &key, &klen, &copied)))
        return rc;
    uint64_t next = alive ? jp_descend(j, alive, d, key, klen, &skip) : 0;
    char small[64], *kz = NULL;
    if (obj && !skip && (rc = jp_charge(j, JP_COST_MEMBER + klen)))
        return rc;
    if (obj && !skip) {
        /* json-c wants the key NUL-terminated; decoded keys already are. */
        if (copied) {
            kz = j->buf;
        } else if (klen < sizeof(small)) {
            memcpy(small, key, klen);
            small[klen] = '\0';
            kz = small;
        } else {
            if ((rc = jp_reserve(j, klen + 1)))
                return rc;
            memcpy(j->buf, key, klen);
            j->buf[klen] = '\0';
            kz = j->buf;
        }
    }
    jp_ws(j);
    if (j->p >= j->end || *j->p != ':')
        return jp_syntax(j, "expected ':'");
    j->p++;
    json_object *v = NULL;
    char *owned = NULL;
    if (kz && kz == j->buf && !(kz = owned = strdup(kz)))
        return jp_nomem(j); /* the value may reuse the scratch buffer */
    /* The streamed member: its array's elements go to each_fn. */
    j->stream_next = kz && depth == 1 && j->each_fn && !strcmp(kz, j->each_member);
    rc = skip ? jp_skip(j) : jp_value(j, depth, next, d + 1, kz ? &v : NULL);
    j->stream_next = false;
    if (!rc && kz && json_object_object_add(obj, kz, v)) {
        json_object_put(v);
        rc = jp_nomem(j);
    }
    free(owned);
    return rc;
}

/* Element i of an array (arr NULL: checked, not built). */
static gq_code jp_element(jp *j, json_object *arr, size_t i, int depth, uint64_t alive, size_t d)
{
    bool skip = false;
    uint64_t next = 0;
    if (alive) {
        /* Only a pattern that names an index needs its text. */
        char idx[24];
        int n = j->index_patterns ? snprintf(idx, sizeof(idx), "%zu", i) : 0;
        next = jp_descend(j, alive, d, idx, (size_t)n, &skip);
    }
    json_object *v = NULL;
    gq_code rc = skip ? jp_skip(j) : jp_value(j, depth, next, d + 1, arr ? &v : NULL);
    if (rc || !arr || skip)
        return rc;
    if (arr == j->stream_arr) { /* handed over, not kept */
        rc = j->each_fn(j->each_ud, j->root, v, j->err);
        json_object_put(v);
    } else if (json_object_array_add(arr, v)) {
        json_object_put(v);
        rc = jp_nomem(j);
    }
    return rc;
}

/* An object or array at j->p; depth counts it. */
static gq_code jp_container(jp *j, bool object, int depth, uint64_t alive, size_t d,
                            json_object **out)
{
    gq_code rc = GQ_OK;
    bool more = false;
    char close = object ? '}' : ']';
    json_object *c = NULL;
    if (depth > j->max_depth)
        return gq_err_set(j->err, GQ_ELIMIT, "JSON nests deeper than %d levels", j->max_depth);
    if (!out)
        alive = 0; /* nothing below is built anyway */
    else if ((rc = jp_charge(j, object ? JP_COST_OBJECT : JP_COST_ARRAY)))
        return rc;
    else if (!(c = object ? json_object_new_object() : json_object_new_array()))
        return jp_nomem(j);
    if (depth == 1 && object)
        j->root = c;
    if (j->stream_next && !object)
        j->stream_arr = c;
    j->stream_next = false; /* only the member's own value streams */
    j->p++;
    jp_ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        goto done;
    }
    for (size_t i = 0;; i++) {
        rc = object ? jp_member(j, c, depth, alive, d) : jp_element(j, c, i, depth, alive, d);
        if (rc || (rc = jp_after_item(j, close, &more)))
            goto out;
        if (!more)
            break;
    }
done:
    if (out)
        *out = c;
    return GQ_OK;
out:
    json_object_put(c);
    return rc;
}

/* One value at j->p (after whitespace). With out NULL the value is checked
 * and skipped. depth counts the containers around it. */
static gq_code jp_value(jp *j, int depth, uint64_t alive, size_t d, json_object **out)
{
    jp_ws(j);
    if (j->p >= j->end)
        return jp_syntax(j, "");
    switch (*j->p) {
    case '{':
        return jp_container(j, true, depth + 1, alive, d, out);
    case '[':
        return jp_container(j, false, depth + 1, alive, d, out);
    case '"': {
        const char *s = NULL;
        size_t n = 0;
        bool copied = false;
        gq_code rc = jp_string(j, out != NULL, &s, &n, &copied);
        if (rc || !out)
            return rc;
        if (n > INT_MAX)
            return gq_err_set(j->err, GQ_ELIMIT, "JSON string too long");
        if ((rc = jp_charge(j, JP_COST_STRING + n)))
            return rc;
        *out = json_object_new_string_len(s, (int)n);
        return *out ? GQ_OK : jp_nomem(j);
    }
    case 't':
    case 'f':
    case 'n': {
        bool t = *j->p == 't', f = *j->p == 'f';
        gq_code rc = jp_literal(j, t ? "true" : f ? "false" : "null", t ? 4 : f ? 5 : 4);
        if (rc || !out)
            return rc;
        if ((rc = jp_charge(j, JP_COST_SCALAR)))
            return rc;
        *out = t || f ? json_object_new_boolean(t) : NULL;
        return t || f ? (*out ? GQ_OK : jp_nomem(j)) : GQ_OK;
    }
    case 'N':
    case 'I':
        return jp_nonfinite(j);
    default:
        if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9'))
            return jp_number(j, out);
        return jp_syntax(j, "unexpected character");
    }
}

gq_code gq_json_parse_pruned(const char *buf, size_t len, int max_depth, const char *const *skip,
                             size_t n_skip, json_object **out, gq_err *err)
{
    gq_json_opts o = {.max_depth = max_depth, .skip = skip, .n_skip = n_skip};
    size_t charged;
    return gq_json_parse_with(buf, len, &o, out, &charged, err);
}

/* A parse of buf[0..len) with o's limits, no pattern yet. */
static void jp_init(jp *j, const char *buf, size_t len, const gq_json_opts *o, gq_err *err)
{
    j->start = j->p = buf;
    j->end = buf + len;
    j->max_depth = o->max_depth < 1 || o->max_depth > 10000 ? GQ_JSON_DEFAULT_DEPTH : o->max_depth;
    j->buf = NULL;
    j->cap = 0;
    j->built = j->charged = 0;
    j->max_tree = o->max_tree;
    j->budget = o->budget;
    j->err = err;
    j->each_member = o->each_member;
    j->each_fn = o->each_member ? o->each_fn : NULL;
    j->each_ud = o->each_ud;
    j->root = j->stream_arr = NULL;
    j->stream_next = false;
    j->n_pat = 0;
    j->index_patterns = false;
    memset(j->deeper, 0, sizeof(j->deeper));
    memset(j->star, 0, sizeof(j->star));
    memset(j->last, 0, sizeof(j->last));
    memset(j->lens_at, 0, sizeof(j->lens_at));
}

/* Add the skip pattern text to j's patterns; *alive gets its bit (none
 * for an empty pattern, which matches nothing). */
static gq_code jp_add_pattern(jp *j, const char *text, uint64_t *alive)
{
    jpat *p = &j->pat[j->n_pat];
    p->n = 0;
    for (const char *s = text; *s;) {
        const char *slash = strchr(s, '/');
        size_t n = slash ? (size_t)(slash - s) : strlen(s);
        if (p->n == GQ_JSON_SKIP_SEGMENTS)
            return gq_err_set(j->err, GQ_EINVAL, "skip pattern %s: more than %d segments", text,
                              GQ_JSON_SKIP_SEGMENTS);
        uint64_t bit = (uint64_t)1 << j->n_pat;
        j->deeper[p->n] |= bit;
        if (n == 1 && s[0] == '*')
            j->star[p->n] |= bit;
        else if (n < 64)
            j->lens_at[p->n] |= (uint64_t)1 << n;
        p->seg[p->n] = s;
        p->len[p->n++] = n;
        j->index_patterns |= n && s[0] >= '0' && s[0] <= '9';
        s += n + (slash != NULL);
    }
    if (p->n) {
        j->last[p->n - 1] |= (uint64_t)1 << j->n_pat;
        *alive |= (uint64_t)1 << j->n_pat++;
    }
    return GQ_OK;
}

gq_code gq_json_parse_with(const char *buf, size_t len, const gq_json_opts *o, json_object **out,
                           size_t *charged, gq_err *err)
{
    gq_code rc = GQ_OK;
    json_object *v = NULL;
    *charged = 0;
    if (!buf || len == 0)
        return gq_err_set(err, GQ_EINVAL, "empty JSON text");
    if (len > INT_MAX)
        return gq_err_set(err, GQ_ELIMIT, "JSON text of %zu bytes is too large", len);
    if (o->n_skip > GQ_JSON_MAX_SKIPS)
        return gq_err_set(err, GQ_EINVAL, "more than %d skip patterns", GQ_JSON_MAX_SKIPS);
    /* On the stack: a heap block this size would cost a malloc consolidation
     * per parse. */
    jp state, *j = &state;
    jp_init(j, buf, len, o, err);
    uint64_t alive = 0;
    for (size_t i = 0; i < o->n_skip && !rc; i++)
        rc = jp_add_pattern(j, o->skip[i], &alive);
    if (rc || (rc = jp_value(j, 0, alive, 0, &v)))
        goto out;
    jp_ws(j);
    if (j->p < j->end) {
        json_object_put(v);
        rc = jp_syntax(j, "unexpected character");
        goto out;
    }
    *out = v;
    *charged = j->charged;
    j->charged = 0;
out:
    gq_json_budget_return(j->budget, j->charged);
    free(j->buf);
    return rc;
}

gq_code gq_json_parse(const char *buf, size_t len, int max_depth, json_object **out, gq_err *err)
{
    return gq_json_parse_pruned(buf, len, max_depth, NULL, 0, out, err);
}

const char *gq_json_compact(json_object *v)
{
    return json_object_to_json_string_ext(v,
                                          JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

gq_code gq_json_to_text(json_object *v, char **out, size_t *out_len)
{
    size_t n = 0;
    const char *s = json_object_to_json_string_length(
        v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
    char *copy = s ? malloc(n + 1) : NULL;
    if (!copy)
        return GQ_ENOMEM;
    memcpy(copy, s, n + 1);
    *out = copy;
    *out_len = n;
    return GQ_OK;
}
