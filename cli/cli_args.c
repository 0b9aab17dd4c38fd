#include "cli_args.h"

#include <errno.h>
#include <stdlib.h>

gq_code gq_cli_parse_long(const char *opt, const char *s, long min, long max, long *out,
                          gq_err *err)
{
    char *end = NULL;
    if (!s || !*s)
        return gq_err_set(err, GQ_EINVAL, "%s: a number is required", opt);
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < min || v > max)
        return gq_err_set(err, GQ_EINVAL, "%s %s: expected a whole number in %ld..%ld", opt, s, min,
                          max);
    *out = v;
    return GQ_OK;
}
