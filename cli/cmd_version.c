#include <stdio.h>

#include "cli/cli.h"

const char gq_cmd_version_summary[] = "print the version";

int gq_cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("gpuquota %s\n", GQ_VERSION);
    return GQ_EXIT_OK;
}
