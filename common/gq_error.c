#include "common/gq_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const gq_code_names[GQ_CODE_COUNT_] = {
    [GQ_OK] = "ok",
    [GQ_ENOMEM] = "out of memory",
    [GQ_EINVAL] = "invalid input",
    [GQ_ERANGE] = "out of range",
    [GQ_ENOTFOUND] = "not found",
    [GQ_EDENIED] = "denied",
    [GQ_EIO] = "I/O error",
    [GQ_ECONFLICT] = "conflict",
    [GQ_ETIMEOUT] = "timed out",
    [GQ_EHTTP] = "unexpected HTTP status",
    [GQ_ETLS] = "TLS error",
    [GQ_EUNSUPPORTED] = "unsupported",
    [GQ_EEXISTS] = "already exists",
    [GQ_EGONE] = "gone",
    [GQ_EUNAUTHORIZED] = "unauthorized",
    [GQ_ELIMIT] = "too large",
    [GQ_EBUSY] = "busy",
};

const char *gq_strerror(gq_code code)
{
    if ((unsigned)code >= GQ_CODE_COUNT_ || !gq_code_names[code])
        return "unknown error";
    return gq_code_names[code];
}

void gq_err_clear(gq_err *err)
{
    if (!err)
        return;
    err->code = GQ_OK;
    err->msg[0] = '\0';
}

gq_code gq_err_vset(gq_err *err, gq_code code, const char *fmt, va_list ap)
{
    if (!err)
        return code;
    err->code = code;
    if (vsnprintf(err->msg, sizeof(err->msg), fmt, ap) < 0)
        err->msg[0] = '\0';
    return code;
}

gq_code gq_err_set(gq_err *err, gq_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gq_err_vset(err, code, fmt, ap);
    va_end(ap);
    return code;
}

gq_code gq_err_oom(gq_err *err)
{
    return gq_err_set(err, GQ_ENOMEM, "out of memory");
}

void gq_err_prefix(gq_err *err, const char *fmt, ...)
{
    if (!err)
        return;
    /* Build "prefix: old" piecewise; truncation keeps the prefix. */
    char old[GQ_ERR_MSG_MAX];
    memcpy(old, err->msg, sizeof(old));
    va_list ap;
    va_start(ap, fmt);
    gq_err_vset(err, err->code, fmt, ap);
    va_end(ap);
    size_t pl = strlen(err->msg);
    if (pl > sizeof(err->msg) - 3)
        pl = sizeof(err->msg) - 3;
    memcpy(err->msg + pl, ": ", 2);
    size_t room = sizeof(err->msg) - pl - 2 - 1;
    size_t ol = strnlen(old, room);
    memcpy(err->msg + pl + 2, old, ol);
    err->msg[pl + 2 + ol] = '\0';
}
