#include "common/buf.h"

#include "common/json_escape.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gq_buf_init(gq_buf *b, size_t max)
{
    memset(b, 0, sizeof(*b));
    b->max = max;
}

/* Record the first failure; the text so far stays readable. */
static gq_code fail(gq_buf *b, gq_code code)
{
    b->err = code;
    return code;
}

gq_code gq_buf_fail(gq_buf *b, gq_code code)
{
    if (!b->err)
        b->err = code;
    return b->err;
}

/* Room for extra more bytes and the NUL, or the sticky error. Growth
 * doubles from 256 bytes but never allocates past max + 1. */
static gq_code reserve(gq_buf *b, size_t extra)
{
    if (b->err)
        return b->err;
    if (extra > b->max - b->len) /* len <= max always holds */
        return fail(b, GQ_ELIMIT);
    size_t need = b->len + extra + 1; /* no overflow unless max is SIZE_MAX */
    if (need == 0)
        return fail(b, GQ_ENOMEM);
    if (need <= b->alloc)
        return GQ_OK;
    size_t alloc = b->alloc ? b->alloc : 256;
    while (alloc < need)
        alloc = alloc > SIZE_MAX / 2 ? need : alloc * 2;
    if (b->max < SIZE_MAX && alloc > b->max + 1)
        alloc = b->max + 1;
    char *p = realloc(b->data, alloc);
    if (!p)
        return fail(b, GQ_ENOMEM);
    p[b->len] = '\0';
    b->data = p;
    b->alloc = alloc;
    return GQ_OK;
}

gq_code gq_buf_add(gq_buf *b, const void *p, size_t n)
{
    gq_code rc = reserve(b, n);
    if (rc || !n)
        return rc;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return GQ_OK;
}

gq_code gq_buf_puts(gq_buf *b, const char *s)
{
    return gq_buf_add(b, s, strlen(s));
}

gq_code gq_buf_vprintf(gq_buf *b, const char *fmt, va_list ap)
{
    if (b->err)
        return b->err;
    va_list size_ap;
    va_copy(size_ap, ap);
    int n = vsnprintf(NULL, 0, fmt, size_ap);
    va_end(size_ap);
    if (n < 0)
        return fail(b, GQ_EINVAL);
    gq_code rc = reserve(b, (size_t)n);
    if (rc || !n)
        return rc;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return GQ_OK;
}

gq_code gq_buf_printf(gq_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gq_code rc = gq_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

/* The length of s as a JSON string with quotes. */
static size_t json_string_len(const char *s)
{
    size_t n = 2;
    for (; *s; s++) {
        char esc[GQ_JSON_ESCAPE_MAX];
        size_t e = gq_json_escape_byte((unsigned char)*s, esc);
        n += e ? e : 1;
    }
    return n;
}

gq_code gq_buf_json_string(gq_buf *b, const char *s)
{
    if (!s)
        return gq_buf_add(b, "null", 4);
    /* Reserved whole first, so the string is all there or not at all. */
    gq_code rc = reserve(b, json_string_len(s));
    if (rc)
        return rc;
    gq_buf_add(b, "\"", 1);
    for (const char *run = s;; s++) {
        char esc[GQ_JSON_ESCAPE_MAX];
        size_t n = *s ? gq_json_escape_byte((unsigned char)*s, esc) : 0;
        if (*s && !n)
            continue;
        gq_buf_add(b, run, (size_t)(s - run)); /* the plain bytes so far */
        if (!*s)
            break;
        gq_buf_add(b, esc, n);
        run = s + 1;
    }
    return gq_buf_add(b, "\"", 1);
}

void gq_buf_reset(gq_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

gq_code gq_buf_finish(gq_buf *b, char **out, size_t *out_len)
{
    gq_code rc = reserve(b, 0); /* the empty text is "", not NULL */
    if (rc) {
        gq_buf_dispose(b);
        return rc;
    }
    *out = b->data;
    if (out_len)
        *out_len = b->len;
    gq_buf_init(b, b->max);
    return GQ_OK;
}

void gq_buf_dispose(gq_buf *b)
{
    if (!b)
        return;
    free(b->data);
    gq_buf_init(b, b->max);
}
