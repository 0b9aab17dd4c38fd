#include "common/gq_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/json_escape.h"
#include "common/rfc3339.h"

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

void gq_log_write(gq_log_level lvl, const char *uid, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (m < 0)
        return;

    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char ts[GQ_RFC3339_MAX];
    gq_time_format_rfc3339_frac((int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000, 3, ts);

    char line[4096];
    size_t len = 0;
    int k = snprintf(line, sizeof(line), "{\"ts\":\"%s\",\"level\":\"%s\"", ts,
                     level_names[lvl < GQ_LOG_OFF ? lvl : GQ_LOG_ERROR]);
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
