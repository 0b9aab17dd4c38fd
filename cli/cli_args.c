#include "cli/cli_args.h"

#include "cli/cli.h"
#include "quota/config.h"
#include "quota/quantity.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

gq_code gq_cli_parse_bytes(const char *opt, const char *s, int64_t min, int64_t max, int64_t *out,
                           gq_err *err)
{
    gq_quantity q;
    int64_t v = 0;
    if (!s || gq_quantity_parse(s, strlen(s), &q, NULL) || gq_quantity_to_int64_ceil(&q, &v) ||
        v < min || v > max)
        return gq_err_set(err, GQ_EINVAL,
                          "%s %s: expected a size in bytes from %" PRId64 " to %" PRId64
                          " (e.g. 32Mi)",
                          opt, s ? s : "", min, max);
    *out = v;
    return GQ_OK;
}

/* Configuration files are small; a larger file is a mistake, not a config. */
#define GQ_CLI_CONFIG_MAX ((size_t)1 << 20)

gq_code gq_cli_load_config(const char *path, gq_config **out, gq_err *err)
{
    char *buf = NULL;
    size_t len = 0;
    if (!path)
        return gq_config_default(out, err);
    gq_code rc = gq_cli_read_file(path, GQ_CLI_CONFIG_MAX, &buf, &len, err);
    if (!rc)
        rc = gq_config_parse(buf, len, path, out, err);
    free(buf);
    return rc;
}
