/* gpuquota config default|check: print the embedded configuration, or check
 * a configuration file the way the webhook would load it at start-up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "quota/config.h"

const char cli_cmd_config_summary[] = "print the default configuration or check a file";

#define CONFIG_FILE_MAX ((size_t)1 << 20)

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuquota config default\n"
               "       gpuquota config check FILE   (FILE may be - for stdin)\n"
               "\n"
               "default  print the effective default configuration as YAML\n"
               "check    validate FILE; prints 'FILE: ok', or 'FILE:LINE: message' on stderr\n"
               "\n"
               "exit status: 0 ok, 2 invalid file or bad usage\n");
}

static int cmd_default(void)
{
    gq_err err = {0};
    gq_config *cfg = NULL;
    char *yaml = NULL;
    size_t len = 0;
    int status = CLI_EXIT_USAGE;
    if (gq_config_default(&cfg, &err) || gq_config_to_yaml(cfg, &yaml, &len, &err)) {
        fprintf(stderr, "gpuquota config: %s\n", err.msg);
        goto out;
    }
    if (fwrite(yaml, 1, len, stdout) != len || fflush(stdout)) {
        perror("gpuquota config: stdout");
        goto out;
    }
    status = CLI_EXIT_OK;
out:
    free(yaml);
    gq_config_free(cfg);
    return status;
}

static int cmd_check(const char *path)
{
    gq_err err = {0};
    char *buf = NULL;
    size_t len = 0;
    gq_config *cfg = NULL;
    int status = CLI_EXIT_USAGE;
    const char *name = strcmp(path, "-") ? path : "<stdin>";
    if (cli_read_file(path, CONFIG_FILE_MAX, &buf, &len, &err) ||
        gq_config_parse(buf, len, name, &cfg, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        goto out;
    }
    printf("%s: ok\n", name);
    status = CLI_EXIT_OK;
out:
    gq_config_free(cfg);
    free(buf);
    return status;
}

int cli_cmd_config(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (argc == 2 && !strcmp(argv[1], "default"))
        return cmd_default();
    if (argc == 3 && !strcmp(argv[1], "check"))
        return cmd_check(argv[2]);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
