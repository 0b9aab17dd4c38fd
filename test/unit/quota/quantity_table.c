/* Table-driven check of quantity parsing and canonical formatting.
 * Usage: quantity_table [FILE]   (default: the project's test/data/quantity.tsv)
 * Each line is `input<TAB>canonical` or `input<TAB>ERROR`; '#' starts a
 * comment line and blank lines are skipped. An input may be empty (the line
 * starts with a TAB). Every canonical form must parse back to the same value
 * (and the same text, for decimal forms). Prints one line per mismatch and
 * then `N passed, M failed`; exits 1 on any failure, 2 when the file cannot
 * be read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quota/quantity.h"

#ifndef GQ_TEST_DATA
#define GQ_TEST_DATA "test/data"
#endif

/* Returns true when `input` gives `want` (a canonical form or "ERROR"). */
static int check(const char *input, const char *want, int lineno)
{
    gq_quantity q;
    gq_err err;
    gq_err_clear(&err);
    gq_code rc = gq_quantity_parse(input, strlen(input), &q, &err);
    if (strcmp(want, "ERROR") == 0) {
        if (rc == GQ_OK) {
            char got[GQ_QUANTITY_STR_MAX];
            gq_quantity_format(&q, got);
            printf("line %d: \"%s\": expected an error, got \"%s\"\n", lineno, input, got);
            return 0;
        }
        return 1;
    }
    if (rc != GQ_OK) {
        printf("line %d: \"%s\": expected \"%s\", got error: %s\n", lineno, input, want, err.msg);
        return 0;
    }
    char got[GQ_QUANTITY_STR_MAX];
    gq_quantity_format(&q, got);
    if (strcmp(got, want) != 0) {
        printf("line %d: \"%s\": expected \"%s\", got \"%s\"\n", lineno, input, want, got);
        return 0;
    }
    gq_quantity back;
    char again[GQ_QUANTITY_STR_MAX];
    if (gq_quantity_parse(got, strlen(got), &back, NULL) != GQ_OK ||
        gq_quantity_cmp(&back, &q) != 0) {
        printf("line %d: \"%s\": canonical \"%s\" does not parse back to the same value\n", lineno,
               input, got);
        return 0;
    }
    /* Only decimal forms are fixed points: "62.5Ki" prints as "64000", which
     * re-parses as decimal SI and prints as "64k", as in Kubernetes. */
    gq_quantity_format(&back, again);
    if (q.format != GQ_QFMT_BINARY_SI && strcmp(again, got) != 0) {
        printf("line %d: \"%s\": canonical \"%s\" re-formats as \"%s\"\n", lineno, input, got,
               again);
        return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : GQ_TEST_DATA "/quantity.tsv";
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return 2;
    }
    char line[1024];
    int lineno = 0, passed = 0, failed = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char *tab = strchr(line, '\t');
        if (!tab) {
            printf("line %d: malformed (no TAB): %s\n", lineno, line);
            failed++;
            continue;
        }
        *tab = '\0';
        if (check(line, tab + 1, lineno))
            passed++;
        else
            failed++;
    }
    int read_error = ferror(f);
    fclose(f);
    if (read_error) {
        fprintf(stderr, "%s: read error\n", path);
        return 2;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
