/* Fuzz gq_config_parse. Properties checked beyond "no crash, no leak":
 * every rejection cites "fuzz.yaml:<line>: ", and every accepted input
 * renders to YAML that parses again and renders identically. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quota/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gq_config *cfg = NULL, *back = NULL;
    gq_err err = {0};
    char *yaml = NULL, *yaml2 = NULL;
    size_t len = 0, len2 = 0;
    if (gq_config_parse((const char *)data, size, "fuzz.yaml", &cfg, &err)) {
        if (err.code != GQ_ENOMEM && strncmp(err.msg, "fuzz.yaml:", 10) != 0)
            abort();
        if (cfg)
            abort();
        return 0;
    }
    if (gq_config_to_yaml(cfg, &yaml, &len, &err))
        abort();
    if (gq_config_parse(yaml, len, "rendered.yaml", &back, &err))
        abort();
    if (gq_config_to_yaml(back, &yaml2, &len2, &err))
        abort();
    if (len != len2 || memcmp(yaml, yaml2, len) != 0)
        abort();
    free(yaml);
    free(yaml2);
    gq_config_free(back);
    gq_config_free(cfg);
    return 0;
}
