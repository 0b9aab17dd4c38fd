/* Small helpers for subcommand argument parsing. */
#ifndef GQ_CLI_ARGS_H
#define GQ_CLI_ARGS_H

#include <stdint.h>

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

/* The configuration of --config FILE, or the embedded default when path is
 * NULL. Errors carry "file:line: message". Caller frees *out. */
struct gq_config;
gq_code gq_cli_load_config(const char *path, struct gq_config **out, gq_err *err) GQ_WUR;

#endif
