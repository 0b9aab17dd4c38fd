#include "cli/cli_args.h"

#include "cli/cli.h"
#include "common/strutil.h"
#include "kube/kube.h"
#include "quota/config.h"
#include "quota/quantity.h"

#include <errno.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

gq_code cli_parse_long(const char *opt, const char *s, long min, long max, long *out, gq_err *err)
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

gq_code cli_parse_bytes(const char *opt, const char *s, int64_t min, int64_t max, int64_t *out,
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

gq_code cli_load_config(const char *path, gq_config **out, gq_err *err)
{
    char *buf = NULL;
    size_t len = 0;
    if (!path)
        return gq_config_default(out, err);
    gq_code rc = cli_read_file(path, CLI_CONFIG_MAX, &buf, &len, err);
    if (!rc)
        rc = gq_config_parse(buf, len, path, out, err);
    free(buf);
    return rc;
}

gq_code cli_own_namespace(const kube_config *kc, const char **out, gq_err *err)
{
    const char *env = getenv("POD_NAMESPACE");
    const char *ns = CLI_DEFAULT_NAMESPACE;
    if (env && env[0])
        ns = env;
    else if (kc && kc->source && !strcmp(kc->source, "in-cluster") && kc->namespace_)
        ns = kc->namespace_;
    if (!gq_is_dns_label(ns))
        return gq_err_set(err, GQ_EINVAL, "POD_NAMESPACE %.64s is not a namespace name", ns);
    *out = ns;
    return GQ_OK;
}

/* The option arg names: exactly, by its alias, or by a unique prefix of its
 * long name. NULL with err set otherwise. */
static const cli_opt *find_opt(const char *arg, size_t len, const cli_opt *opts, size_t n,
                               gq_err *err)
{
    const cli_opt *prefix = NULL;
    size_t n_prefix = 0;
    for (size_t i = 0; i < n; i++) {
        const cli_opt *o = &opts[i];
        if ((strlen(o->name) == len && !strncmp(o->name, arg, len)) ||
            (o->alias && strlen(o->alias) == len && !strncmp(o->alias, arg, len)))
            return o;
        if (len > 2 && arg[1] == '-' && !strncmp(o->name, arg, len)) {
            prefix = o;
            n_prefix++;
        }
    }
    if (n_prefix == 1)
        return prefix;
    gq_err_set(err, GQ_EINVAL, "%s option %.*s", n_prefix ? "ambiguous" : "unknown",
               (int)(len > 64 ? 64 : len), arg);
    return NULL;
}

static gq_code store_value(const cli_opt *o, const char *v, gq_err *err)
{
    switch (o->kind) {
    case CLI_OPT_NONEMPTY:
        if (!*v)
            return gq_err_set(err, GQ_EINVAL, "%s needs a value", o->name);
        /* fall through */
    case CLI_OPT_STRING:
        *(const char **)o->dst = v;
        return GQ_OK;
    case CLI_OPT_LIST: {
        cli_list *l = o->dst;
        if (l->n == l->cap)
            return gq_err_set(err, GQ_ELIMIT, "at most %zu %s", l->cap, o->name);
        l->v[l->n++] = v;
        return GQ_OK;
    }
    case CLI_OPT_CHOICE: {
        char list[256];
        size_t len = 0;
        list[0] = '\0';
        for (int i = 0; o->choices[i]; i++) {
            if (!strcmp(v, o->choices[i])) {
                *(int *)o->dst = i;
                return GQ_OK;
            }
            int k = snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "", o->choices[i]);
            if (k > 0 && (size_t)k < sizeof(list) - len)
                len += (size_t)k;
        }
        return gq_err_set(err, GQ_EINVAL, "%s %.64s: one of %s", o->alias ? o->alias : o->name, v,
                          list);
    }
    case CLI_OPT_LONG:
        return cli_parse_long(o->name, v, o->min, o->max, o->dst, err);
    case CLI_OPT_FN:
        return o->fn(o->name, v, o->dst, err);
    case CLI_OPT_FLAG:
        break;
    }
    return gq_err_set(err, GQ_EINVAL, "%s takes no value", o->name);
}

cli_parsed cli_parse(int argc, char **argv, const cli_opt *opts, size_t n, const char **pos,
                     size_t *n_pos, gq_err *err)
{
    bool options = true;
    if (n_pos)
        *n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!options || a[0] != '-' || !a[1]) {
            if (!pos) {
                gq_err_set(err, GQ_EINVAL, "unexpected argument %.64s", a);
                return CLI_BAD;
            }
            pos[(*n_pos)++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            options = false;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return CLI_HELP;
        const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
        const cli_opt *o = find_opt(a, eq ? (size_t)(eq - a) : strlen(a), opts, n, err);
        if (!o)
            return CLI_BAD;
        if (o->kind == CLI_OPT_FLAG) {
            if (eq) {
                gq_err_set(err, GQ_EINVAL, "%s takes no value", o->name);
                return CLI_BAD;
            }
            *(bool *)o->dst = true;
            continue;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (!v) {
            if (i + 1 >= argc) {
                gq_err_set(err, GQ_EINVAL, "%s needs a value", o->name);
                return CLI_BAD;
            }
            v = argv[++i];
        }
        if (store_value(o, v, err))
            return CLI_BAD;
    }
    return CLI_PARSED;
}

int cli_parse_or_exit(const cli_cmd *cmd, int argc, char **argv, const char **pos, size_t *n_pos)
{
    gq_err err;
    gq_err_clear(&err);
    switch (cli_parse(argc, argv, cmd->opts, cmd->n_opts, pos, n_pos, &err)) {
    case CLI_PARSED:
        return -1;
    case CLI_HELP:
        cmd->usage(stdout);
        return CLI_EXIT_OK;
    case CLI_BAD:
        break;
    }
    fprintf(stderr, "gpuquota %s: %s\n", cmd->name, err.msg);
    cmd->usage(stderr);
    return CLI_EXIT_USAGE;
}
