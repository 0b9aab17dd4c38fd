#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

struct gq_cmd_entry {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
};

static const struct gq_cmd_entry gq_cmds[] = {
#define GQ_CMD(n) {#n, gq_cmd_##n, gq_cmd_##n##_summary},
#include "gq_commands.h"
#undef GQ_CMD
};

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuquota COMMAND [ARGS...]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(gq_cmds) / sizeof(gq_cmds[0]); i++)
        fprintf(f, "  %-12s %s\n", gq_cmds[i].name, gq_cmds[i].summary);
    fprintf(f, "\n'gpuquota COMMAND --help' describes a command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return GQ_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return GQ_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof(gq_cmds) / sizeof(gq_cmds[0]); i++)
        if (!strcmp(argv[1], gq_cmds[i].name))
            return gq_cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "gpuquota: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return GQ_EXIT_USAGE;
}
