#define _XOPEN_SOURCE 700 /* strptime */
/* Small helpers shared by the stand-in: buffers, time, ids, JSON access. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "standin.h"

void sbuf_dispose(sbuf *b)
{
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void sbuf_add(sbuf *b, const void *p, size_t n)
{
    if (b->oom)
        return;
    if (n > SIZE_MAX / 2 - b->len - 1) {
        b->oom = 1;
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->len + n + 1)
            nc *= 2;
        char *nd = realloc(b->data, nc);
        if (!nd) {
            b->oom = 1;
            return;
        }
        b->data = nd;
        b->cap = nc;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void sbuf_adds(sbuf *b, const char *s)
{
    sbuf_add(b, s, strlen(s));
}

void sbuf_addf(sbuf *b, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n < sizeof tmp) {
        sbuf_add(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sbuf_add(b, big, (size_t)n);
    free(big);
}

char *sbuf_take(sbuf *b)
{
    if (b->oom) {
        sbuf_dispose(b);
        b->oom = 0;
        return NULL;
    }
    if (!b->data)
        sbuf_add(b, "", 0);
    char *d = b->data;
    b->data = NULL;
    b->len = b->cap = 0;
    return d;
}

void si_now_rfc3339(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

long long si_parse_rfc3339(const char *s)
{
    struct tm tm = {0};
    if (!s)
        return -1;
    const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end)
        return -1;
    return (long long)timegm(&tm);
}

void si_uuid(char *buf, size_t n)
{
    unsigned char r[16];
    arc4random_buf(r, sizeof r);
    r[6] = (unsigned char)((r[6] & 0x0f) | 0x40);
    r[8] = (unsigned char)((r[8] & 0x3f) | 0x80);
    snprintf(buf, n, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0],
             r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13],
             r[14], r[15]);
}

void si_random_suffix(char *buf)
{
    /* apimachinery's utilrand alphabet leaves out vowels and look-alikes so
     * generated names never spell words. */
    static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    for (int i = 0; i < 5; i++)
        buf[i] = alphabet[arc4random_uniform(sizeof alphabet - 1)];
    buf[5] = '\0';
}

json_object *si_obj(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!o || !json_object_is_type(o, json_type_object))
        return NULL;
    if (!json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

const char *si_str(json_object *o, const char *path)
{
    char part[128];
    const char *p = path;
    while (o && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof part)
            return NULL;
        memcpy(part, p, n);
        part[n] = '\0';
        o = si_obj(o, part);
        p += n;
        if (*p == '.')
            p++;
    }
    if (!o || !json_object_is_type(o, json_type_string))
        return NULL;
    return json_object_get_string(o);
}

json_object *si_parse_json(const char *s, size_t n, gq_err *err)
{
    if (n > SI_BODY_MAX || n > INT32_MAX) {
        gq_err_set(err, GQ_ELIMIT, "request body too large");
        return NULL;
    }
    json_tokener *tok = json_tokener_new_ex(SI_JSON_DEPTH);
    if (!tok) {
        gq_err_oom(err);
        return NULL;
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *o = json_tokener_parse_ex(tok, s, (int)n);
    enum json_tokener_error je = json_tokener_get_error(tok);
    if (je == json_tokener_continue) {
        json_object_put(o);
        o = NULL;
        gq_err_set(err, GQ_EINVAL, "unexpected end of JSON input");
    } else if (!o && je != json_tokener_success) {
        gq_err_set(err, GQ_EINVAL, "%s", json_tokener_error_desc(je));
    } else if (o || je == json_tokener_success) {
        size_t off = json_tokener_get_parse_end(tok);
        while (off < n && (s[off] == ' ' || s[off] == '\n' || s[off] == '\r' || s[off] == '\t'))
            off++;
        if (off != n) {
            json_object_put(o);
            o = NULL;
            gq_err_set(err, GQ_EINVAL, "invalid character after top-level value");
        } else if (!o) {
            gq_err_set(err, GQ_EINVAL, "null body");
        }
    }
    json_tokener_free(tok);
    return o;
}

const char *si_to_json(json_object *o)
{
    return json_object_to_json_string_ext(o,
                                          JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

char *si_b64_encode(const void *data, size_t n, int url)
{
    static const char b64_std[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    static const char b64_url[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const unsigned char *d = data;
    const char *tbl = url ? b64_url : b64_std;
    sbuf b = {0};
    sbuf_add(&b, "", 0);
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)d[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)d[i + 1] << 8;
        if (i + 2 < n)
            v |= d[i + 2];
        char o[4] = {tbl[(v >> 18) & 63], tbl[(v >> 12) & 63], tbl[(v >> 6) & 63], tbl[v & 63]};
        size_t keep = i + 2 < n ? 4 : i + 1 < n ? 3 : 2;
        sbuf_add(&b, o, url ? keep : 4);
        if (!url && keep < 4)
            memset(b.data + b.len - (4 - keep), '=', 4 - keep);
    }
    return sbuf_take(&b);
}

/* Value of one base64 digit in either alphabet, -1 if none. */
static int b64_val(char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+' || ch == '-')
        return 62;
    if (ch == '/' || ch == '_')
        return 63;
    return -1;
}

char *si_b64_decode(const char *s, size_t *out_len)
{
    sbuf b = {0};
    unsigned v = 0;
    int bits = 0;
    size_t n = strlen(s);
    if (n > SI_BODY_MAX)
        return NULL;
    sbuf_add(&b, "", 0);
    for (size_t i = 0; i < n && s[i] != '='; i++) {
        int d = b64_val(s[i]);
        if (d < 0) {
            sbuf_dispose(&b);
            return NULL;
        }
        v = ((v << 6) | (unsigned)d) & 0xffffffu;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            char out = (char)((v >> bits) & 0xff);
            sbuf_add(&b, &out, 1);
        }
    }
    if (out_len)
        *out_len = b.len;
    return sbuf_take(&b);
}
