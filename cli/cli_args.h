/* Subcommand argument parsing: one table-driven option parser for every
 * subcommand, and value parsers for its tables.
 *
 * A subcommand describes its options in a table and parses argv in one call:
 *
 *     static const char *const outputs[] = {"text", "json", NULL};
 *     const cli_opt opts[] = {
 *         {.name = "--config", .kind = CLI_OPT_STRING, .dst = &o->config},
 *         {.name = "--state", .kind = CLI_OPT_LIST, .dst = &o->state}, (a cli_list)
 *         {.name = "--output", .alias = "-o", .kind = CLI_OPT_CHOICE, .dst = &o->out,
 *          .choices = outputs},
 *         {.name = "--threads", .kind = CLI_OPT_LONG, .dst = &o->threads, .min = 1, .max = 256},
 *         {.name = "--resync", .kind = CLI_OPT_FN, .dst = &o->resync_ms, .fn = parse_ms},
 *         {.name = "--denied", .kind = CLI_OPT_FLAG, .dst = &o->denied},
 *     };
 *     int rc = cli_parse_or_exit(&(cli_cmd){"admit", opts, n_opts, usage}, argc, argv,
 *                                   pos, &n_pos);
 *
 * and keeps parsing (argv into an options struct) apart from wiring (the
 * struct into the program). Values follow as "--name VALUE", "--name=VALUE"
 * or "-o VALUE"; a long name may be shortened to any unique prefix (as
 * getopt_long allows); "--" ends the options; "-" is an argument (stdin).
 * Options and arguments may be mixed; "--help" and "-h" ask for help. */
#ifndef CLI_ARGS_H
#define CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/gq_error.h"

/* Parse a whole decimal integer in [min, max] (no sign games, no trailing
 * text). GQ_EINVAL with a message naming opt otherwise; *out untouched. */
gq_code cli_parse_long(const char *opt, const char *s, long min, long max, long *out,
                       gq_err *err) GQ_WUR;

/* Parse a byte count written as a Kubernetes quantity ("32Mi", "1G",
 * "4096") in [min, max]; fractions round up. GQ_EINVAL with a message
 * naming opt otherwise; *out untouched. */
gq_code cli_parse_bytes(const char *opt, const char *s, int64_t min, int64_t max, int64_t *out,
                        gq_err *err) GQ_WUR;

typedef enum cli_opt_kind {
    CLI_OPT_FLAG,     /* dst bool *: set to true; takes no value */
    CLI_OPT_STRING,   /* dst const char **: the value (borrowed from argv; the last wins) */
    CLI_OPT_NONEMPTY, /* the same; an empty value is refused */
    CLI_OPT_LIST,     /* dst cli_list *: each value appended, at most cap */
    CLI_OPT_CHOICE,   /* dst int *: the index of the value in choices */
    CLI_OPT_LONG,     /* dst long *: a whole number in [min, max] (cli_parse_long) */
    CLI_OPT_FN,       /* fn(name, value, dst, err) parses the value into dst */
} cli_opt_kind;

/* A repeatable option's values: caller-owned array v of cap entries. */
typedef struct cli_list {
    const char **v;
    size_t n, cap;
} cli_list;

typedef struct cli_opt {
    const char *name;  /* "--config" */
    const char *alias; /* a short form ("-o") or NULL */
    cli_opt_kind kind;
    void *dst;
    const char *const *choices; /* CLI_OPT_CHOICE: NULL-terminated */
    long min, max;              /* CLI_OPT_LONG */
    gq_code (*fn)(const char *name, const char *value, void *dst, gq_err *err); /* CLI_OPT_FN */
} cli_opt;

typedef enum cli_parsed {
    CLI_PARSED = 0, /* options stored, arguments in pos[0..*n_pos) */
    CLI_HELP = 1,   /* --help or -h: print the usage on stdout, exit 0 */
    CLI_BAD = 2     /* err says what is wrong: print it and the usage, exit 2 */
} cli_parsed;

/* Parse argv[1..argc) (argv[0] is the subcommand) against opts[0..n).
 * Arguments that are not options go to pos (room for argc entries; NULL
 * when the subcommand takes none: then any is an error). Errors name the
 * option: "unknown option --x", "--config needs a value", "-o yaml: one of
 * text, json", "at most 64 --state", "unexpected argument x", or the value
 * parser's message. Destinations are written as options are read. */
cli_parsed cli_parse(int argc, char **argv, const cli_opt *opts, size_t n, const char **pos,
                     size_t *n_pos, gq_err *err);

/* A subcommand as its parser sees it: its name in messages ("admit",
 * "certs generate", ...), its option table and its usage text. */
typedef struct cli_cmd {
    const char *name;
    const cli_opt *opts;
    size_t n_opts;
    void (*usage)(FILE *f);
} cli_cmd;

/* cli_parse of cmd's options, then what every subcommand does with the
 * outcome: on help, usage(stdout); on an error, "gpuquota NAME: MESSAGE"
 * and usage(stderr). Returns -1 when the command goes on, else its exit
 * status (CLI_EXIT_OK after help, CLI_EXIT_USAGE after an error). */
int cli_parse_or_exit(const cli_cmd *cmd, int argc, char **argv, const char **pos, size_t *n_pos);

/* The most a gpuquota configuration file or ConfigMap value may hold. */
#define CLI_CONFIG_MAX ((size_t)1 << 20)

/* The configuration of --config FILE, or the embedded default when path is
 * NULL. Errors carry "file:line: message". Caller frees *out. */
struct gq_config;
gq_code cli_load_config(const char *path, struct gq_config **out, gq_err *err) GQ_WUR;

/* The namespace gpuquota's own objects are in when no flag names it. */
#define CLI_DEFAULT_NAMESPACE "gpuquota-system"

/* The namespace this process runs in: $POD_NAMESPACE (the Deployments set
 * it from the downward API), else the service account's namespace when kc
 * was loaded in-cluster, else CLI_DEFAULT_NAMESPACE. *out points into the
 * environment or kc. GQ_EINVAL when the name found is not a namespace name. */
struct kube_config;
gq_code cli_own_namespace(const struct kube_config *kc, const char **out, gq_err *err) GQ_WUR;

#endif
