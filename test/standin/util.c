#define _XOPEN_SOURCE 700 /* strptime */
/* Small helpers shared by the stand-in: buffers, time, ids, JSON access. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "standin.h"

char *si_buf_take(gq_buf *b)
{
    char *text = NULL;
    return gq_buf_finish(b, &text, NULL) ? NULL : text;
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
    gq_buf b;
    gq_buf_init(&b, SI_TEXT_MAX);
    gq_buf_add(&b, "", 0);
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)d[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)d[i + 1] << 8;
        if (i + 2 < n)
            v |= d[i + 2];
        char o[4] = {tbl[(v >> 18) & 63], tbl[(v >> 12) & 63], tbl[(v >> 6) & 63], tbl[v & 63]};
        size_t keep = i + 2 < n ? 4 : i + 1 < n ? 3 : 2;
        if (!url && keep < 4)
            memset(o + keep, '=', 4 - keep);
        gq_buf_add(&b, o, url ? keep : 4);
    }
    return si_buf_take(&b);
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
    gq_buf b;
    gq_buf_init(&b, SI_TEXT_MAX);
    unsigned v = 0;
    int bits = 0;
    size_t n = strlen(s);
    if (n > SI_BODY_MAX)
        return NULL;
    gq_buf_add(&b, "", 0);
    for (size_t i = 0; i < n && s[i] != '='; i++) {
        int d = b64_val(s[i]);
        if (d < 0) {
            gq_buf_dispose(&b);
            return NULL;
        }
        v = ((v << 6) | (unsigned)d) & 0xffffffu;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            char out = (char)((v >> bits) & 0xff);
            gq_buf_add(&b, &out, 1);
        }
    }
    if (out_len)
        *out_len = b.len;
    return si_buf_take(&b);
}
