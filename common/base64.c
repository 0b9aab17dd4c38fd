#include "common/base64.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

gq_code gq_base64_encode(const void *in, size_t len, char **out, size_t *out_len)
{
    const unsigned char *s = in;
    if (len > (SIZE_MAX - 1) / 4 * 3 - 3)
        return GQ_ERANGE;
    size_t n = (len + 2) / 3 * 4;
    char *d = malloc(n + 1);
    if (!d)
        return GQ_ENOMEM;
    size_t w = 0, i = 0;
    for (; i + 2 < len; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        d[w++] = b64_alphabet[v >> 18];
        d[w++] = b64_alphabet[(v >> 12) & 63];
        d[w++] = b64_alphabet[(v >> 6) & 63];
        d[w++] = b64_alphabet[v & 63];
    }
    if (i < len) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)s[i + 1] << 8;
        d[w++] = b64_alphabet[v >> 18];
        d[w++] = b64_alphabet[(v >> 12) & 63];
        d[w++] = i + 1 < len ? b64_alphabet[(v >> 6) & 63] : '=';
        d[w++] = '=';
    }
    d[w] = '\0';
    *out = d;
    *out_len = w;
    return GQ_OK;
}

static int b64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

gq_code gq_base64_decode(const char *in, size_t len, unsigned char **out, size_t *out_len)
{
    if (len % 4)
        return GQ_EINVAL;
    unsigned char *d = malloc(len / 4 * 3 + 1);
    if (!d)
        return GQ_ENOMEM;
    size_t w = 0;
    for (size_t i = 0; i < len; i += 4) {
        bool last = i + 4 == len;
        int pad = 0;
        if (last && in[i + 3] == '=')
            pad = in[i + 2] == '=' ? 2 : 1;
        int v[4];
        for (int k = 0; k < 4 - pad; k++) {
            v[k] = b64_value(in[i + (size_t)k]);
            if (v[k] < 0)
                goto bad;
        }
        for (int k = 4 - pad; k < 4; k++)
            v[k] = 0;
        uint32_t x =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        /* Canonical encodings only: the bits under the padding must be 0. */
        if ((pad == 1 && (x & 0xff)) || (pad == 2 && (x & 0xffff)))
            goto bad;
        d[w++] = (unsigned char)(x >> 16);
        if (pad < 2)
            d[w++] = (unsigned char)(x >> 8);
        if (pad < 1)
            d[w++] = (unsigned char)x;
    }
    d[w] = '\0';
    *out = d;
    *out_len = w;
    return GQ_OK;
bad:
    free(d);
    return GQ_EINVAL;
}
