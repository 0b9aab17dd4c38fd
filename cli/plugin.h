/* kubectl gpuquota: the pieces `top` and `explain` share.
 *
 *   - the usual kubectl flags and the client they select (plugin_kube.c);
 *   - pure rendering (plugin_render.c): the usage report of quota objects,
 *     bars, tables and a YAML printer, unit-tested without a cluster.
 *
 * Reports are json-c objects so that -o json and -o yaml print exactly what
 * the table shows. */
#ifndef CLI_PLUGIN_H
#define CLI_PLUGIN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>

#include "common/gq_error.h"

/* ---- flags and client ------------------------------------------------------ */

typedef enum cli_out_fmt {
    CLI_OUT_TABLE = 0,
    CLI_OUT_JSON = 1,
    CLI_OUT_YAML = 2,
} cli_out_fmt;

/* kubectl's flags, as kubectl spells them: --kubeconfig F, --context C,
 * -n/--namespace NS, -A/--all-namespaces, -o/--output table|json|yaml.
 * Strings are borrowed from argv. */
typedef struct cli_kflags {
    const char *kubeconfig;
    const char *context;
    const char *namespace_;
    bool all_namespaces;
    int output; /* a cli_out_fmt */
} cli_kflags;

/* Those flags as entries of a subcommand's option table (cli/cli_args.h),
 * writing into f: out[0..CLI_KFLAGS_N). */
#define CLI_KFLAGS_N 5
struct cli_opt;
void cli_kflags_opts(cli_kflags *f, struct cli_opt *out);

/* The usage lines of those flags, for --help. */
extern const char cli_kflags_usage[];

struct kube_client;
struct kube_config;

/* The client of f's kubeconfig and context (kubectl's order: --kubeconfig,
 * else $KUBECONFIG, else in-cluster, else ~/.kube/config) and the namespace
 * to work in: -n, else the context's (kubectl's "default" when none). Caller
 * frees *client (kube_client_free) and *ns. */
gq_code cli_kflags_client(const cli_kflags *f, struct kube_client **client, char **ns,
                          gq_err *err) GQ_WUR;

/* The configuration the webhooks run with, as every command that prices
 * pods against a cluster reads it: file (--config) when given, else the
 * config.yaml of ConfigMap gpuquota-config in sys_ns (where gpuquota is
 * installed), else, when that cannot be read, the embedded default.
 * *source (cap bytes) says which, and why the ConfigMap was not used. */
struct gq_config;
gq_code cli_cluster_config(struct kube_client *c, const char *file, const char *sys_ns,
                           struct gq_config **out, char *source, size_t cap, gq_err *err) GQ_WUR;

/* GQ_EINVAL naming what unless ns is a valid namespace name (RFC 1123
 * label), as it is put into API paths. */
gq_code cli_check_namespace(const char *what, const char *ns, gq_err *err) GQ_WUR;

/* Where gpuquota is installed, for the commands that read its ConfigMap:
 * flag (--gpuquota-namespace) when given, else $GPUQUOTA_NAMESPACE, else
 * CLI_DEFAULT_NAMESPACE. GQ_EINVAL naming the source unless it is a
 * namespace name. */
gq_code cli_gpuquota_namespace(const char *flag, const char **out, gq_err *err) GQ_WUR;

/* Print v as -o asks (json: pretty JSON; yaml: YAML). */
void cli_print_doc(FILE *out, cli_out_fmt fmt, json_object *v);

/* ---- small shared pieces ---------------------------------------------------- */

/* Objects gathered from a list (kube_list's item callback: cli_objs_collect
 * with a cli_objs as ud). Each item is held (json_object_get); at most max
 * (GQ_ELIMIT beyond). */
typedef struct cli_objs {
    json_object **v;
    size_t n, cap, max;
} cli_objs;

gq_code cli_objs_collect(void *ud, json_object *item, gq_err *err) GQ_WUR;
void cli_objs_dispose(cli_objs *o);

struct gq_amounts;
/* One quota value: binary-SI bytes for gpu-memory ("20Gi"), integers for
 * counts. buf holds GQ_QUANTITY_STR_MAX (48) bytes. */
void cli_fmt_amount(int k, int64_t v, char buf[48]);

struct gq_quota;
/* The quota's kind, namespace (a GPUQuota's) and name as members of o: how
 * every report (top, explain, queue) names a quota. */
void cli_quota_ident(json_object *o, const struct gq_quota *q);

/* ---- pure rendering ---------------------------------------------------------- */

/* Width of a usage bar, brackets excluded. */
#define CLI_BAR_WIDTH 20

/* "[####==......]": '#' for used, '=' for reserved and queued, '.' for what
 * is left of hard, each cell rounded down except that any non-zero part
 * shows at least one cell; over hard the bar is full and ends in '!'. A zero
 * hard shows a full bar when anything is used, an empty one otherwise.
 * buf holds CLI_BAR_WIDTH + 3 bytes. */
void cli_render_bar(int64_t used, int64_t pending, int64_t hard, char buf[CLI_BAR_WIDTH + 3]);

/* The usage report of GPUQuota and GPUTenantQuota objects (borrowed) at time
 * now (Unix seconds: reservations still live count as reserved):
 *   {"quotas": [{"kind", "namespace" (GPUQuota only), "name", "resources": [
 *        {"resource", "hard" (the nominal share), "used", "reserved",
 *         "queued" (only when the status has status.queued), "borrowed" and
 *         "lent" (only when the status has status.borrowed, status.lent for
 *         the key), and the same as numbers in "hardValue", "usedValue",
 *         "reservedValue", "queuedValue", "borrowedValue", "lentValue", and
 *         "percent" of hard taken by used + reserved + queued}],
 *      "namespaces": [{"namespace", "used": {...}}] (tenants),
 *      "models": [{"model", "used": {...}, "hard": {...}}] (when the status
 *         has status.models)}]}
 * Quotas come GPUQuotas first (by namespace, then name), then tenants by
 * name; resources in key order. An object that does not parse as a quota is
 * reported in "errors": ["ns/name: message"] and skipped. Caller owns *out. */
gq_code cli_top_report(json_object *const *objs, size_t n, int64_t now, json_object **out,
                       gq_err *err) GQ_WUR;

/* The table of such a report: one row per quota and resource with a bar,
 * tenants' namespaces and per-model usage indented below their quota; when
 * some quota reports borrowed or lent, BORROWED and LENT columns after HARD
 * ("-" for a quota that does not report them). */
void cli_render_top_table(FILE *out, json_object *report);

/* YAML text of a JSON value: maps and lists in block style, strings
 * double-quoted when YAML would read them as something else. */
void cli_render_yaml(FILE *out, json_object *v);

#endif
