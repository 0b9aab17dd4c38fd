/* gpuquota audit: review gpuquota audit logs and kube-apiserver audit logs.
 * Reading, filtering and counting are cli/auditlog.h; this file does the
 * I/O: files line by line with a bounded line buffer, --state, output. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/auditlog.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "quota/crd.h"
#include "common/yamljson.h"

const char cli_cmd_audit_summary[] = "review gpuquota and kube-apiserver audit logs";

#define AUDIT_STATE_MAX 16
#define AUDIT_STATE_BYTES ((size_t)16 << 20)

enum out_format { OUT_TABLE, OUT_JSON, OUT_SUMMARY };

typedef struct audit_opts {
    const char **files;
    size_t n_files;
    const char *since, *namespace_, *tenant, *user, *webhook;
    cli_list state; /* --state files */
    const char *state_files[AUDIT_STATE_MAX];
    bool denied;
    enum out_format out;
} audit_opts;

typedef struct audit_counts {
    unsigned long long records, too_long, malformed, other;
} audit_counts;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: gpuquota audit [FILE...] [--since D] [--namespace NS] [--tenant T --state FILE]\n"
        "                      [--user U] [--webhook W] [--denied] [-o table|json|summary]\n"
        "\n"
        "Reviews admission decisions in gpuquota audit logs and kube-apiserver audit logs\n"
        "(audit.k8s.io/v1 Event lines); the kind is detected per line. FILE may be '-' for\n"
        "standard input (the default); give rotated files oldest first (audit.log.2\n"
        "audit.log.1 audit.log). Malformed lines and lines longer than 1 MiB are skipped\n"
        "and counted on standard error.\n"
        "\n"
        "--since D       a duration before now (90m, 2h, 7d, 1h30m) or an RFC 3339 time\n"
        "--namespace NS  decisions in namespace NS\n"
        "--tenant T      decisions in namespaces of GPUTenantQuota T (needs --state)\n"
        "--state FILE    YAML/JSON with the GPUTenantQuota and Namespace objects (repeatable)\n"
        "--user U        decisions on requests by user U\n"
        "--webhook W     decisions of webhook W (mutate, validate)\n"
        "--denied        denied decisions only\n"
        "-o FORMAT       table (default), json (one normalised record per line) or summary\n"
        "\n"
        "exit status: 0, 2 bad usage or unreadable file\n");
}

/* argv into *o (strings borrowed from argv; o->files allocated, freed by
 * the caller). -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, audit_opts *o)
{
    static const char *const outputs[] = {"table", "json", "summary", NULL};
    int out = OUT_TABLE;
    memset(o, 0, sizeof(*o));
    o->state = (cli_list){o->state_files, 0, AUDIT_STATE_MAX};
    const cli_opt opts[] = {
        {.name = "--since", .kind = CLI_OPT_STRING, .dst = &o->since},
        {.name = "--namespace", .kind = CLI_OPT_STRING, .dst = &o->namespace_},
        {.name = "--tenant", .kind = CLI_OPT_STRING, .dst = &o->tenant},
        {.name = "--user", .kind = CLI_OPT_STRING, .dst = &o->user},
        {.name = "--webhook", .kind = CLI_OPT_STRING, .dst = &o->webhook},
        {.name = "--state", .kind = CLI_OPT_LIST, .dst = &o->state},
        {.name = "--denied", .kind = CLI_OPT_FLAG, .dst = &o->denied},
        {.name = "--output",
         .alias = "-o",
         .kind = CLI_OPT_CHOICE,
         .dst = &out,
         .choices = outputs},
    };
    o->files = calloc((size_t)argc, sizeof(*o->files));
    if (!o->files) {
        fprintf(stderr, "gpuquota audit: out of memory\n");
        return CLI_EXIT_USAGE;
    }
    int rc = cli_parse_or_exit(&(cli_cmd){"audit", opts, sizeof(opts) / sizeof(opts[0]), usage},
                               argc, argv, o->files, &o->n_files);
    o->out = (enum out_format)out;
    if (rc < 0 && o->tenant && !o->state.n) {
        fprintf(stderr, "gpuquota audit: --tenant needs --state FILE with the GPUTenantQuota\n");
        rc = CLI_EXIT_USAGE;
    }
    return rc;
}

/* --state: the tenant quota and the namespaces' labels. Trees stay alive
 * (the labels are borrowed by the filter) until state_dispose. */
typedef struct audit_state {
    json_object **docs[AUDIT_STATE_MAX];
    size_t n_docs[AUDIT_STATE_MAX];
    gq_quota *tenant;
    const char **ns_names;
    json_object **ns_labels;
    size_t n_ns, cap_ns;
} audit_state;

static void state_dispose(audit_state *st)
{
    for (size_t i = 0; i < AUDIT_STATE_MAX; i++)
        gq_yaml_docs_free(st->docs[i], st->n_docs[i]);
    gq_quota_free(st->tenant);
    free(st->ns_names);
    free(st->ns_labels);
}

static const char *str_at(json_object *obj, const char *a, const char *b)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(obj, a, &v) || (b && !json_object_object_get_ex(v, b, &v)) ||
        !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

static gq_code state_take(audit_state *st, const char *tenant, json_object *doc, int depth,
                          gq_err *err)
{
    const char *kind = str_at(doc, "kind", NULL);
    const char *name = str_at(doc, "metadata", "name");
    json_object *v = NULL;
    if (!kind)
        return GQ_OK;
    if (!strcmp(kind, "List") && depth == 0 && json_object_object_get_ex(doc, "items", &v) &&
        json_object_is_type(v, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(v); i++) {
            gq_code rc = state_take(st, tenant, json_object_array_get_idx(v, i), 1, err);
            if (rc)
                return rc;
        }
        return GQ_OK;
    }
    if (!strcmp(kind, GQ_KIND_GPUTENANTQUOTA) && name && !strcmp(name, tenant) && !st->tenant) {
        gq_code rc = gq_quota_parse(doc, &st->tenant, err);
        if (rc)
            gq_err_prefix(err, "GPUTenantQuota %s", name);
        return rc;
    }
    if (!strcmp(kind, "Namespace") && name) {
        if (st->n_ns == st->cap_ns) {
            size_t cap = st->cap_ns ? st->cap_ns * 2 : 16;
            const char **names = realloc(st->ns_names, cap * sizeof(*names));
            if (names)
                st->ns_names = names;
            json_object **labels = realloc(st->ns_labels, cap * sizeof(*labels));
            if (labels)
                st->ns_labels = labels;
            if (!names || !labels)
                return gq_err_oom(err);
            st->cap_ns = cap;
        }
        json_object *meta = NULL, *labels = NULL;
        json_object_object_get_ex(doc, "metadata", &meta);
        json_object_object_get_ex(meta, "labels", &labels);
        st->ns_names[st->n_ns] = name;
        st->ns_labels[st->n_ns++] = labels;
    }
    return GQ_OK;
}

static gq_code state_load(const audit_opts *o, audit_state *st, gq_err *err)
{
    gq_code rc = GQ_OK;
    for (size_t i = 0; i < o->state.n && !rc; i++) {
        char *buf = NULL;
        size_t len = 0;
        rc = cli_read_file(o->state.v[i], AUDIT_STATE_BYTES, &buf, &len, err);
        if (!rc)
            rc = gq_yaml_load(buf, len, o->state.v[i], &st->docs[i], &st->n_docs[i], err);
        free(buf);
        for (size_t j = 0; !rc && j < st->n_docs[i]; j++)
            rc = state_take(st, o->tenant ? o->tenant : "", st->docs[i][j], 0, err);
    }
    if (!rc && o->tenant && !st->tenant)
        rc = gq_err_set(err, GQ_ENOTFOUND, "GPUTenantQuota %s is not in the --state files",
                        o->tenant);
    return rc;
}

/* ---- output --------------------------------------------------------------- */

/* s in a column of width w: control bytes shown as '?' (log text must not
 * drive the terminal), cut with "~" when longer; w 0: as long as it is. */
static void put_col(const char *s, size_t w, bool last)
{
    size_t n = s ? strlen(s) : 1;
    size_t show = w && n > w ? w - 1 : n;
    if (!s)
        putchar('-');
    for (size_t i = 0; s && i < show; i++) {
        unsigned char c = (unsigned char)s[i];
        putchar(c < 0x20 || c == 0x7f ? '?' : c);
    }
    if (s && show < n)
        putchar('~');
    if (last) {
        putchar('\n');
        return;
    }
    for (size_t i = (s && show < n) ? show + 1 : n; i < w + 2; i++)
        putchar(' ');
}

static void print_table_header(void)
{
    printf("%-20s  %-8s  %-7s  %-16s  %-24s  %-24s  %-8s  %s\n", "TIME", "WEBHOOK", "OP",
           "NAMESPACE", "NAME", "USER", "DECISION", "CHARGE/REASON");
}

static void print_table_row(const gq_audit_entry *e)
{
    char ts[GQ_RFC3339_MAX], charge[128];
    if (e->has_time)
        gq_time_format_rfc3339(e->t, ts);
    put_col(e->has_time ? ts : e->time, 20, false);
    put_col(e->webhook, 8, false);
    put_col(e->operation, 7, false);
    put_col(e->namespace_, 16, false);
    put_col(e->name, 24, false);
    put_col(e->user, 24, false);
    put_col(e->decision == GQ_AUDIT_ALLOWED  ? (e->dry_run ? "dry-run" : "allowed")
            : e->decision == GQ_AUDIT_DENIED ? "denied"
                                             : "error",
            8, false);
    cli_audit_charge_text(e, charge, sizeof(charge));
    put_col(e->decision == GQ_AUDIT_ALLOWED ? charge : e->reason, 80, true);
}

static void print_summary_row(const cli_audit_ns_summary *n, const char *label)
{
    char mem[GQ_QUANTITY_STR_MAX];
    if (n->charged_overflow)
        snprintf(mem, sizeof(mem), "overflow");
    else
        gq_format_bytes(n->charged_bytes, mem);
    printf("%-24s  %8llu  %6llu  %6llu  %-10s  ", label, (unsigned long long)n->admitted,
           (unsigned long long)n->denied, (unsigned long long)n->errors, mem);
    if (!n->n_reasons) {
        printf("-\n");
        return;
    }
    for (size_t i = 0; i < n->n_reasons && i < 3; i++) {
        fputs(i ? "; " : "", stdout);
        put_col(n->reasons[i].text, 0, false);
        printf(" (%llu)", (unsigned long long)n->reasons[i].count);
    }
    putchar('\n');
}

static void print_summary(cli_audit_summary *s)
{
    cli_audit_summary_finish(s);
    printf("%-24s  %8s  %6s  %6s  %-10s  %s\n", "NAMESPACE", "ADMITTED", "DENIED", "ERRORS",
           "GPU-MEMORY", "TOP DENY REASONS");
    for (size_t i = 0; i < s->n_ns; i++)
        print_summary_row(&s->ns[i], s->ns[i].namespace_[0] ? s->ns[i].namespace_ : "(none)");
    print_summary_row(&s->total, "TOTAL");
}

/* ---- reading ------------------------------------------------------------ */

typedef struct audit_run {
    const audit_opts *o;
    const cli_audit_filter *filter;
    cli_audit_summary summary;
    audit_counts counts;
    char *line; /* CLI_AUDIT_LINE_MAX bytes */
} audit_run;

static gq_code handle_line(audit_run *r, const char *line, size_t len)
{
    gq_audit_entry e;
    gq_err err;
    gq_code rc = cli_audit_parse_line(line, len, &e, &err);
    if (rc == GQ_ENOMEM)
        return rc;
    if (rc == GQ_ENOTFOUND) {
        r->counts.other++;
        return GQ_OK;
    }
    if (rc) {
        r->counts.malformed++;
        return GQ_OK;
    }
    r->counts.records++;
    if (cli_audit_matches(&e, r->filter)) {
        if (r->o->out == OUT_TABLE) {
            print_table_row(&e);
        } else if (r->o->out == OUT_JSON) {
            gq_buf b;
            char *text = NULL;
            size_t n = 0;
            gq_buf_init(&b, CLI_AUDIT_JSON_MAX);
            cli_audit_entry_to_json(&e, &b);
            rc = gq_buf_finish(&b, &text, &n);
            if (!rc) {
                fwrite(text, 1, n, stdout);
                putchar('\n');
            }
            free(text);
        } else {
            rc = cli_audit_summary_add(&r->summary, &e);
        }
    }
    gq_audit_entry_dispose(&e);
    return rc;
}

/* Lines of f, each at most CLI_AUDIT_LINE_MAX bytes; longer ones are skipped
 * to their end and counted. Blank lines are ignored. */
static gq_code read_stream(audit_run *r, FILE *f)
{
    size_t len = 0;
    bool too_long = false;
    int c;
    gq_code rc = GQ_OK;
    while (!rc && (c = getc(f)) != EOF) {
        if (c != '\n') {
            if (len < CLI_AUDIT_LINE_MAX)
                r->line[len++] = (char)c;
            else
                too_long = true;
            continue;
        }
        if (too_long)
            r->counts.too_long++;
        else if (len && !(len == 1 && r->line[0] == '\r'))
            rc = handle_line(r, r->line, len);
        len = 0;
        too_long = false;
    }
    if (!rc && too_long)
        r->counts.too_long++;
    else if (!rc && len)
        rc = handle_line(r, r->line, len); /* last line without newline */
    return rc;
}

/* The filter of the options (with --state's tenant); CLI_EXIT_OK, else
 * CLI_EXIT_USAGE with the message printed. */
static int make_filter(const audit_opts *o, audit_state *st, cli_audit_filter *filter)
{
    gq_err err;
    if (o->since && cli_audit_parse_since(o->since, (int64_t)time(NULL), &filter->since, &err)) {
        fprintf(stderr, "gpuquota audit: %s\n", err.msg);
        return CLI_EXIT_USAGE;
    }
    filter->has_since = o->since != NULL;
    filter->namespace_ = o->namespace_;
    filter->user = o->user;
    filter->webhook = o->webhook;
    filter->denied_only = o->denied;
    if (o->state.n && state_load(o, st, &err)) {
        fprintf(stderr, "gpuquota audit: --state: %s\n", err.msg);
        return CLI_EXIT_USAGE;
    }
    if (o->tenant) {
        filter->tenant = st->tenant;
        filter->ns_names = st->ns_names;
        filter->ns_labels = st->ns_labels;
        filter->n_ns = st->n_ns;
    }
    return CLI_EXIT_OK;
}

/* Every file of the command line (stdin without any), in order; a file that
 * cannot be opened or read is reported and the next one read. */
static int read_files(audit_run *run)
{
    static const char *const stdin_only[] = {"-"};
    const audit_opts *o = run->o;
    const char *const *files = o->n_files ? o->files : stdin_only;
    size_t n_files = o->n_files ? o->n_files : 1;
    int status = CLI_EXIT_OK;
    for (size_t i = 0; i < n_files; i++) {
        bool is_stdin = !strcmp(files[i], "-");
        FILE *f = is_stdin ? stdin : fopen(files[i], "rb");
        if (!f) {
            fprintf(stderr, "gpuquota audit: %s: %s\n", files[i], strerror(errno));
            status = CLI_EXIT_USAGE;
            continue;
        }
        gq_code rc = read_stream(run, f);
        if (!rc && ferror(f)) {
            fprintf(stderr, "gpuquota audit: %s: read error\n", files[i]);
            status = CLI_EXIT_USAGE;
        }
        if (!is_stdin)
            fclose(f);
        if (rc) {
            fprintf(stderr, "gpuquota audit: %s: %s\n", files[i], gq_strerror(rc));
            return CLI_EXIT_USAGE;
        }
    }
    return status;
}

static void report_skipped(const audit_counts *c)
{
    if (c->malformed || c->too_long || c->other)
        fprintf(stderr,
                "gpuquota audit: %llu records read; skipped %llu malformed lines, %llu lines "
                "longer than %zu bytes, %llu lines that are not admission records\n",
                c->records, c->malformed, c->too_long, CLI_AUDIT_LINE_MAX, c->other);
}

/* Read, filter and print; the exit status. */
static int review(const audit_opts *o, const cli_audit_filter *filter)
{
    audit_run run;
    memset(&run, 0, sizeof(run));
    run.o = o;
    run.filter = filter;
    cli_audit_summary_init(&run.summary);
    int status = CLI_EXIT_USAGE;
    if (!(run.line = malloc(CLI_AUDIT_LINE_MAX))) {
        fprintf(stderr, "gpuquota audit: out of memory\n");
        goto out;
    }
    if (o->out == OUT_TABLE)
        print_table_header();
    status = read_files(&run);
    if (o->out == OUT_SUMMARY)
        print_summary(&run.summary);
    fflush(stdout);
    report_skipped(&run.counts);
out:
    free(run.line);
    cli_audit_summary_dispose(&run.summary);
    return status;
}

int cli_cmd_audit(int argc, char **argv)
{
    audit_opts o;
    audit_state st;
    cli_audit_filter filter;
    memset(&st, 0, sizeof(st));
    memset(&filter, 0, sizeof(filter));
    int status = parse_args(argc, argv, &o);
    if (status >= 0) {
        free(o.files);
        return status;
    }
    status = make_filter(&o, &st, &filter);
    if (status == CLI_EXIT_OK)
        status = review(&o, &filter);
    state_dispose(&st);
    free(o.files);
    return status;
}
