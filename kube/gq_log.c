#include "gq_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

gq_log_level gq_log_threshold = GQ_LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error", "off"};

gq_code gq_log_parse_level(const char *s, gq_log_level *out)
{
    for (int i = 0; i <= GQ_LOG_OFF; i++) {
        if (s && !strcasecmp(s, level_names[i])) {
            *out = (gq_log_level)i;
            return GQ_OK;
        }
    }
    return GQ_EINVAL;
}

void gq_log_init(void)
{
    gq_log_level lvl;
    const char *env = getenv("GQ_LOG_LEVEL");
    if (env && gq_log_parse_level(env, &lvl) == GQ_OK)
        gq_log_threshold = lvl;
}

void gq_log_set_level(gq_log_level lvl)
{
    gq_log_threshold = lvl;
}

void gq_json_escape_into(char *buf, size_t cap, size_t *len, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = *len;
    if (cap == 0)
        return;
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        char tmp[7];
        size_t tl;
        if (c == '"' || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            tl = 2;
        } else if (c == '\n') {
            memcpy(tmp, "\\n", 2);
            tl = 2;
        } else if (c == '\t') {
            memcpy(tmp, "\\t", 2);
            tl = 2;
        } else if (c < 0x20 || c == 0x7f) {
            memcpy(tmp, "\\u00", 4);
            tmp[4] = hex[c >> 4];
            tmp[5] = hex[c & 15];
            tl = 6;
        } else {
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

void gq_log_write(gq_log_level lvl, const char *uid, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (m < 0)
        return;

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);

    char line[4096];
    size_t len = 0;
    int k = snprintf(line, sizeof(line),
                     "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\",\"level\":\"%s\"",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000L, level_names[lvl < GQ_LOG_OFF ? lvl : GQ_LOG_ERROR]);
    if (k < 0 || (size_t)k >= sizeof(line))
        return;
    /* Assemble the rest piecewise: literal JSON syntax is copied as is, only
     * values are escaped. The header above is at most ~70 bytes, so the
     * literal pieces always fit; values are truncated to leave room. */
    len = (size_t)k;
    if (uid) {
        const char *p = ",\"uid\":\"";
        size_t pl = strlen(p);
        memcpy(line + len, p, pl);
        len += pl;
        gq_json_escape_into(line, sizeof(line) - 200, &len, uid);
        line[len++] = '"';
    }
    const char *mp = ",\"msg\":\"";
    size_t mpl = strlen(mp);
    memcpy(line + len, mp, mpl);
    len += mpl;
    gq_json_escape_into(line, sizeof(line) - 4, &len, msg);
    memcpy(line + len, "\"}\n", 3);
    len += 3;
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}
