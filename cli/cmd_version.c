#include <stdio.h>

#include "cli/cli.h"

const char cli_cmd_version_summary[] = "print the version";

int cli_cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("gpuquota %s\n", GQ_VERSION);
    return CLI_EXIT_OK;
}
