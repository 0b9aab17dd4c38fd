/* Logging for the shells (kube/, webhook/, controller/, certs/, cli/): one JSON object
 * per line on stderr, e.g.
 *   {"ts":"2026-11-21T15:02:12.123Z","level":"info","uid":"b8f4...","msg":"..."}
 * The level is checked before the arguments are evaluated. The pure core
 * (quota/) never logs. Thread-safe: one write(2) per line. */
#ifndef GQ_LOG_H
#define GQ_LOG_H

#include "common/gq_error.h"

typedef enum gq_log_level {
    GQ_LOG_DEBUG = 0,
    GQ_LOG_INFO = 1,
    GQ_LOG_WARN = 2,
    GQ_LOG_ERROR = 3,
    GQ_LOG_OFF = 4,
} gq_log_level;

/* Current threshold (default INFO; GQ_LOG_LEVEL=debug|info|warn|error|off
 * in the environment sets it at the first call of gq_log_init). */
extern gq_log_level gq_log_threshold;

void gq_log_init(void);
void gq_log_set_level(gq_log_level lvl);
/* "debug" ... "off" -> level; GQ_EINVAL for anything else. */
gq_code gq_log_parse_level(const char *s, gq_log_level *out) GQ_WUR;

/* Write one line. uid may be NULL (omitted). The message is JSON-escaped and
 * control characters are replaced, so untrusted text cannot forge lines. */
void gq_log_write(gq_log_level lvl, const char *uid, const char *fmt, ...) GQ_PRINTF(3, 4);

#define GQ_LOG(lvl, uid, ...)                                                                      \
    do {                                                                                           \
        if ((lvl) >= gq_log_threshold)                                                             \
            gq_log_write((lvl), (uid), __VA_ARGS__);                                               \
    } while (0)
#define GQ_DEBUG(...) GQ_LOG(GQ_LOG_DEBUG, NULL, __VA_ARGS__)
#define GQ_INFO(...) GQ_LOG(GQ_LOG_INFO, NULL, __VA_ARGS__)
#define GQ_WARN(...) GQ_LOG(GQ_LOG_WARN, NULL, __VA_ARGS__)
#define GQ_ERROR(...) GQ_LOG(GQ_LOG_ERROR, NULL, __VA_ARGS__)

#endif
