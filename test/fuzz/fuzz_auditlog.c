/* Audit log lines: arbitrary bytes, one line per '\n', must never crash;
 * every error carries its code and a message; every record parsed prints as
 * JSON that parses back, and filters and the summary accept it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/auditlog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *end = p + size;
    cli_audit_summary s;
    cli_audit_summary_init(&s);
    const cli_audit_filter f = {.has_since = true, .since = 0, .denied_only = false};
    while (p <= end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        gq_audit_entry e;
        gq_err err;
        gq_err_clear(&err);
        gq_code rc = cli_audit_parse_line(p, len, &e, &err);
        if (rc) {
            if (err.code != rc || err.msg[0] == '\0')
                abort();
        } else {
            gq_buf b;
            char *text = NULL, charge[128];
            size_t n = 0;
            json_object *back = NULL;
            gq_buf_init(&b, CLI_AUDIT_JSON_MAX);
            cli_audit_entry_to_json(&e, &b);
            if (gq_buf_finish(&b, &text, &n) != GQ_OK)
                abort();
            if (gq_json_parse(text, n, GQ_JSON_DEFAULT_DEPTH, &back, NULL) != GQ_OK)
                abort();
            json_object_put(back);
            free(text);
            cli_audit_charge_text(&e, charge, sizeof(charge));
            (void)cli_audit_matches(&e, &f);
            if (cli_audit_summary_add(&s, &e) != GQ_OK)
                abort();
            gq_audit_entry_dispose(&e);
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    cli_audit_summary_finish(&s);
    cli_audit_summary_dispose(&s);
    return 0;
}
