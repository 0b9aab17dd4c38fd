#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

gq_code cli_read_file(const char *path, size_t max, char **out, size_t *out_len, gq_err *err)
{
    int is_stdin = !strcmp(path, "-");
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f)
        return gq_err_set(err, GQ_EIO, "%s: %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    gq_code rc = GQ_OK;
    if (!buf) {
        rc = gq_err_set(err, GQ_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    for (;;) {
        if (len + 1 >= cap) {
            if (cap > max) {
                rc = gq_err_set(err, GQ_ELIMIT, "%s: larger than %zu bytes", path, max);
                goto out;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                rc = gq_err_set(err, GQ_ENOMEM, "%s: out of memory", path);
                goto out;
            }
            buf = nb;
            cap *= 2;
        }
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (len > max) {
            rc = gq_err_set(err, GQ_ELIMIT, "%s: larger than %zu bytes", path, max);
            goto out;
        }
        if (n == 0) {
            if (ferror(f))
                rc = gq_err_set(err, GQ_EIO, "%s: read error", path);
            break;
        }
    }
out:
    if (!is_stdin)
        fclose(f);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[len] = '\0';
    *out = buf;
    *out_len = len;
    return GQ_OK;
}
