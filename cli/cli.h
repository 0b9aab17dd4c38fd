/* The gpuquota binary: every subcommand lives in cli/cmd_NAME.c and defines
 *   int cli_cmd_NAME(int argc, char **argv);   argv[0] is the subcommand name
 *   extern const char cli_cmd_NAME_summary[];   one line for `gpuquota help`
 * The build generates the dispatch table from the file names.
 *
 * Exit codes shared by all subcommands. */
#ifndef CLI_H
#define CLI_H

#define CLI_EXIT_OK 0
#define CLI_EXIT_DENIED 1 /* admit: the pod would be denied; check: a finding */
#define CLI_EXIT_USAGE 2  /* bad input or bad usage */

#define CLI_CMD(name)                                                                              \
    int cli_cmd_##name(int argc, char **argv);                                                     \
    extern const char cli_cmd_##name##_summary[];
#include "cli_commands.h"
#undef CLI_CMD

/* Read a whole file (or "-" for stdin) into a NUL-terminated heap buffer, at
 * most max bytes. Returns 0, or -1 with a message in err (errno kept). */
#include "common/gq_error.h"
#include <stddef.h>
gq_code cli_read_file(const char *path, size_t max, char **out, size_t *out_len,
                      gq_err *err) GQ_WUR;

#endif
