#include "common/json_escape.h"

#include <string.h>

size_t gq_json_escape_byte(unsigned char c, char out[GQ_JSON_ESCAPE_MAX])
{
    static const char hex[] = "0123456789abcdef";
    char short_form = 0;
    switch (c) {
    case '"':
    case '\\':
        short_form = (char)c;
        break;
    case '\b':
        short_form = 'b';
        break;
    case '\f':
        short_form = 'f';
        break;
    case '\n':
        short_form = 'n';
        break;
    case '\r':
        short_form = 'r';
        break;
    case '\t':
        short_form = 't';
        break;
    default:
        if (c >= 0x20)
            return 0;
    }
    out[0] = '\\';
    if (short_form) {
        out[1] = short_form;
        return 2;
    }
    memcpy(out + 1, "u00", 3);
    out[4] = hex[c >> 4];
    out[5] = hex[c & 15];
    return 6;
}

void gq_json_escape_into(char *buf, size_t cap, size_t *len, const char *s)
{
    size_t n = *len;
    if (cap == 0)
        return;
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        char tmp[GQ_JSON_ESCAPE_MAX];
        size_t tl =
            c == 0x7f ? (memcpy(tmp, "\\u007f", 6), (size_t)6) : gq_json_escape_byte(c, tmp);
        if (!tl) {
            tmp[0] = (char)c;
            tl = 1;
        }
        if (n + tl >= cap)
            break;
        memcpy(buf + n, tmp, tl);
        n += tl;
    }
    buf[n] = '\0';
    *len = n;
}
