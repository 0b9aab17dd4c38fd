/* Subcommand argument parsing: one table-driven option parser for every
 * subcommand, and value parsers for its tables.
 *
 * A subcommand describes its options in a table and parses argv in one call:
 *
 *     static const char *const outputs[] = {"text", "json", NULL};
 *     const gq_cli_opt opts[] = {
 *         {.name = "--config", .kind = GQ_OPT_STRING, .dst = &o->config},
 *         {.name = "--state", .kind = GQ_OPT_LIST, .dst = &o->state}, (a gq_cli_list)
 *         {.name = "--output", .alias = "-o", .kind = GQ_OPT_CHOICE, .dst = &o->out,
 *          .choices = outputs},
 *         {.name = "--threads", .kind = GQ_OPT_LONG, .dst = &o->threads, .min = 1, .max = 256},
 *         {.name = "--resync", .kind = GQ_OPT_FN, .dst = &o->resync_ms, .fn = parse_ms},
 *         {.name = "--denied", .kind = GQ_OPT_FLAG, .dst = &o->denied},
 *     };
 *     int rc = gq_cli_parse_or_exit(&(gq_cli_cmd){"admit", opts, n_opts, usage}, argc, argv,
 *                                   pos, &n_pos);
 *
 * and keeps parsing (argv into an options struct) apart from wiring (the
 * struct into the program). Values follow as "--name VALUE", "--name=VALUE"
 * or "-o VALUE"; a long name may be shortened to any unique prefix (as
 * getopt_long allows); "--" ends the options; "-" is an argument (stdin).
 * Options and arguments may be mixed; "--help" and "-h" ask for help. */
#ifndef GQ_CLI_ARGS_H
#define GQ_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/gq_error.h"

/* Parse a whole decimal integer in [min, max] (no sign games, no trailing
 * text). GQ_EINVAL with a message naming opt otherwise; *out untouched. */
gq_code gq_cli_parse_long(const char *opt, const char *s, long min, long max, long *out,
                          gq_err *err) GQ_WUR;

/* Parse a byte count written as a Kubernetes quantity ("32Mi", "1G",
 * "4096") in [min, max]; fractions round up. GQ_EINVAL with a message
 * naming opt otherwise; *out untouched. */
gq_code gq_cli_parse_bytes(const char *opt, const char *s, int64_t min, int64_t max, int64_t *out,
                           gq_err *err) GQ_WUR;

typedef enum gq_cli_opt_kind {
    GQ_OPT_FLAG,     /* dst bool *: set to true; takes no value */
    GQ_OPT_STRING,   /* dst const char **: the value (borrowed from argv; the last wins) */
    GQ_OPT_NONEMPTY, /* the same; an empty value is refused */
    GQ_OPT_LIST,     /* dst gq_cli_list *: each value appended, at most cap */
    GQ_OPT_CHOICE,   /* dst int *: the index of the value in choices */
    GQ_OPT_LONG,     /* dst long *: a whole number in [min, max] (gq_cli_parse_long) */
    GQ_OPT_FN,       /* fn(name, value, dst, err) parses the value into dst */
} gq_cli_opt_kind;

/* A repeatable option's values: caller-owned array v of cap entries. */
typedef struct gq_cli_list {
    const char **v;
    size_t n, cap;
} gq_cli_list;

typedef struct gq_cli_opt {
    const char *name;  /* "--config" */
    const char *alias; /* a short form ("-o") or NULL */
    gq_cli_opt_kind kind;
    void *dst;
    const char *const *choices; /* GQ_OPT_CHOICE: NULL-terminated */
    long min, max;              /* GQ_OPT_LONG */
    gq_code (*fn)(const char *name, const char *value, void *dst, gq_err *err); /* GQ_OPT_FN */
} gq_cli_opt;

typedef enum gq_cli_parsed {
    GQ_CLI_PARSED = 0, /* options stored, arguments in pos[0..*n_pos) */
    GQ_CLI_HELP = 1,   /* --help or -h: print the usage on stdout, exit 0 */
    GQ_CLI_BAD = 2     /* err says what is wrong: print it and the usage, exit 2 */
} gq_cli_parsed;

/* Parse argv[1..argc) (argv[0] is the subcommand) against opts[0..n).
 * Arguments that are not options go to pos (room for argc entries; NULL
 * when the subcommand takes none: then any is an error). Errors name the
 * option: "unknown option --x", "--config needs a value", "-o yaml: one of
 * text, json", "at most 64 --state", "unexpected argument x", or the value
 * parser's message. Destinations are written as options are read. */
gq_cli_parsed gq_cli_parse(int argc, char **argv, const gq_cli_opt *opts, size_t n,
                           const char **pos, size_t *n_pos, gq_err *err);

/* A subcommand as its parser sees it: its name in messages ("admit",
 * "certs generate", ...), its option table and its usage text. */
typedef struct gq_cli_cmd {
    const char *name;
    const gq_cli_opt *opts;
    size_t n_opts;
    void (*usage)(FILE *f);
} gq_cli_cmd;

/* gq_cli_parse of cmd's options, then what every subcommand does with the
 * outcome: on help, usage(stdout); on an error, "gpuquota NAME: MESSAGE"
 * and usage(stderr). Returns -1 when the command goes on, else its exit
 * status (GQ_EXIT_OK after help, GQ_EXIT_USAGE after an error). */
int gq_cli_parse_or_exit(const gq_cli_cmd *cmd, int argc, char **argv, const char **pos,
                         size_t *n_pos);

/* The configuration of --config FILE, or the embedded default when path is
 * NULL. Errors carry "file:line: message". Caller frees *out. */
struct gq_config;
gq_code gq_cli_load_config(const char *path, struct gq_config **out, gq_err *err) GQ_WUR;

#endif
