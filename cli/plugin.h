/* kubectl gpuquota: the pieces `top` and `explain` share.
 *
 *   - the usual kubectl flags and the client they select (plugin_kube.c);
 *   - pure rendering (plugin_render.c): the usage report of quota objects,
 *     bars, tables and a YAML printer, unit-tested without a cluster.
 *
 * Reports are json-c objects so that -o json and -o yaml print exactly what
 * the table shows. */
#ifndef GQ_PLUGIN_H
#define GQ_PLUGIN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>

#include "common/gq_error.h"

/* ---- flags and client ------------------------------------------------------ */

typedef enum gq_out_fmt {
    GQ_OUT_TABLE = 0,
    GQ_OUT_JSON = 1,
    GQ_OUT_YAML = 2,
} gq_out_fmt;

/* kubectl's flags, as kubectl spells them: --kubeconfig F, --context C,
 * -n/--namespace NS, -A/--all-namespaces, -o/--output table|json|yaml.
 * Strings are borrowed from argv. */
typedef struct gq_kflags {
    const char *kubeconfig;
    const char *context;
    const char *namespace_;
    bool all_namespaces;
    int output; /* a gq_out_fmt */
} gq_kflags;

/* Those flags as entries of a subcommand's option table (cli/cli_args.h),
 * writing into f: out[0..GQ_KFLAGS_N). */
#define GQ_KFLAGS_N 5
struct gq_cli_opt;
void gq_kflags_opts(gq_kflags *f, struct gq_cli_opt *out);

/* The usage lines of those flags, for --help. */
extern const char gq_kflags_usage[];

struct kube_client;
struct kube_config;

/* The client of f's kubeconfig and context (kubectl's order: --kubeconfig,
 * else $KUBECONFIG, else in-cluster, else ~/.kube/config) and the namespace
 * to work in: -n, else the context's (kubectl's "default" when none). Caller
 * frees *client (kube_client_free) and *ns. */
gq_code gq_kflags_client(const gq_kflags *f, struct kube_client **client, char **ns,
                         gq_err *err) GQ_WUR;

/* GQ_EINVAL naming what unless ns is a valid namespace name (RFC 1123
 * label), as it is put into API paths. */
gq_code gq_check_namespace(const char *what, const char *ns, gq_err *err) GQ_WUR;

/* Print v as -o asks (json: pretty JSON; yaml: YAML). */
void gq_print_doc(FILE *out, gq_out_fmt fmt, json_object *v);

/* ---- small shared pieces ---------------------------------------------------- */

/* Objects gathered from a list (kube_list's item callback: gq_objs_collect
 * with a gq_objs as ud). Each item is held (json_object_get); at most max
 * (GQ_ELIMIT beyond). */
typedef struct gq_objs {
    json_object **v;
    size_t n, cap, max;
} gq_objs;

gq_code gq_objs_collect(void *ud, json_object *item, gq_err *err) GQ_WUR;
void gq_objs_dispose(gq_objs *o);

struct gq_amounts;
/* One quota value: binary-SI bytes for gpu-memory ("20Gi"), integers for
 * counts. buf holds GQ_QUANTITY_STR_MAX (48) bytes. */
void gq_fmt_amount(int k, int64_t v, char buf[48]);

/* ---- pure rendering ---------------------------------------------------------- */

/* Width of a usage bar, brackets excluded. */
#define GQ_BAR_WIDTH 20

/* "[####==......]": '#' for used, '=' for reserved and queued, '.' for what
 * is left of hard, each cell rounded down except that any non-zero part
 * shows at least one cell; over hard the bar is full and ends in '!'. A zero
 * hard shows a full bar when anything is used, an empty one otherwise.
 * buf holds GQ_BAR_WIDTH + 3 bytes. */
void gq_render_bar(int64_t used, int64_t pending, int64_t hard, char buf[GQ_BAR_WIDTH + 3]);

/* The usage report of GPUQuota and GPUTenantQuota objects (borrowed) at time
 * now (Unix seconds: reservations still live count as reserved):
 *   {"quotas": [{"kind", "namespace" (GPUQuota only), "name", "resources": [
 *        {"resource", "hard", "used", "reserved", "queued" (only when the
 *         status has status.queued), and the same as numbers in "hardValue",
 *         "usedValue", "reservedValue", "queuedValue", and "percent" of
 *         hard taken by used + reserved + queued}],
 *      "namespaces": [{"namespace", "used": {...}}] (tenants),
 *      "models": [{"model", "used": {...}, "hard": {...}}] (when the status
 *         has status.models)}]}
 * Quotas come GPUQuotas first (by namespace, then name), then tenants by
 * name; resources in key order. An object that does not parse as a quota is
 * reported in "errors": ["ns/name: message"] and skipped. Caller owns *out. */
gq_code gq_top_report(json_object *const *objs, size_t n, int64_t now, json_object **out,
                      gq_err *err) GQ_WUR;

/* The table of such a report: one row per quota and resource with a bar,
 * tenants' namespaces and per-model usage indented below their quota. */
void gq_render_top_table(FILE *out, json_object *report);

/* YAML text of a JSON value: maps and lists in block style, strings
 * double-quoted when YAML would read them as something else. */
void gq_render_yaml(FILE *out, json_object *v);

#endif
