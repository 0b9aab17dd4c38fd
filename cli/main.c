#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

struct cli_cmd_entry {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
};

static const struct cli_cmd_entry cli_cmds[] = {
#define CLI_CMD(n) {#n, cli_cmd_##n, cli_cmd_##n##_summary},
#include "cli_commands.h"
#undef CLI_CMD
};

static const char *prog = "gpuquota";

static void usage(FILE *f)
{
    fprintf(f, "usage: %s COMMAND [ARGS...]\n\ncommands:\n", prog);
    for (size_t i = 0; i < sizeof(cli_cmds) / sizeof(cli_cmds[0]); i++)
        fprintf(f, "  %-12s %s\n", cli_cmds[i].name, cli_cmds[i].summary);
    fprintf(f, "\n'%s COMMAND --help' describes a command.\n", prog);
}

/* Installed as kubectl-gpuquota (krew's convention), kubectl runs the binary
 * for `kubectl gpuquota ARGS`: the same commands under the plugin's name. */
static bool run_as_plugin(const char *argv0)
{
    const char *base = strrchr(argv0, '/');
    base = base ? base + 1 : argv0;
    return !strcmp(base, "kubectl-gpuquota");
}

int main(int argc, char **argv)
{
    if (argc >= 1 && run_as_plugin(argv[0]))
        prog = "kubectl gpuquota";
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof(cli_cmds) / sizeof(cli_cmds[0]); i++)
        if (!strcmp(argv[1], cli_cmds[i].name))
            return cli_cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "%s: unknown command '%s'\n", prog, argv[1]);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
