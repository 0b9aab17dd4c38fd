/* Resource types: the built-in table and the types stored CRDs define. */
#include <stdio.h>
#include <string.h>

#include "standin.h"

static const rtype builtins[] = {
    {.group = "",
     .version = "v1",
     .resource = "namespaces",
     .singular = "namespace",
     .kind = "Namespace",
     .list_kind = "NamespaceList",
     .skey = "namespaces",
     .has_status = 1,
     .short_names = {"ns"},
     .field_labels = {"status.phase"}},
    {.group = "",
     .version = "v1",
     .resource = "pods",
     .singular = "pod",
     .kind = "Pod",
     .list_kind = "PodList",
     .skey = "pods",
     .namespaced = 1,
     .has_status = 1,
     .short_names = {"po"},
     .categories = {"all"},
     .field_labels = {"status.phase", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                      "spec.serviceAccountName", "spec.hostNetwork", "status.podIP",
                      "status.nominatedNodeName"}},
    {.group = "",
     .version = "v1",
     .resource = "events",
     .singular = "event",
     .kind = "Event",
     .list_kind = "EventList",
     .skey = "events",
     .namespaced = 1,
     .create_on_update = 1,
     .short_names = {"ev"},
     .field_labels = {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                      "involvedObject.uid", "involvedObject.apiVersion",
                      "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
                      "reportingComponent", "source", "type"}},
    {.group = "",
     .version = "v1",
     .resource = "secrets",
     .singular = "secret",
     .kind = "Secret",
     .list_kind = "SecretList",
     .skey = "secrets",
     .namespaced = 1,
     .field_labels = {"type"}},
    {.group = "",
     .version = "v1",
     .resource = "configmaps",
     .singular = "configmap",
     .kind = "ConfigMap",
     .list_kind = "ConfigMapList",
     .skey = "configmaps",
     .namespaced = 1,
     .short_names = {"cm"}},
    {.group = "",
     .version = "v1",
     .resource = "serviceaccounts",
     .singular = "serviceaccount",
     .kind = "ServiceAccount",
     .list_kind = "ServiceAccountList",
     .skey = "serviceaccounts",
     .namespaced = 1,
     .short_names = {"sa"}},
    {.group = "",
     .version = "v1",
     .resource = "services",
     .singular = "service",
     .kind = "Service",
     .list_kind = "ServiceList",
     .skey = "services",
     .namespaced = 1,
     .has_status = 1,
     .short_names = {"svc"},
     .categories = {"all"}},
    {.group = "",
     .version = "v1",
     .resource = "resourcequotas",
     .singular = "resourcequota",
     .kind = "ResourceQuota",
     .list_kind = "ResourceQuotaList",
     .skey = "resourcequotas",
     .namespaced = 1,
     .has_status = 1,
     .short_names = {"quota"}},
    {.group = "apps",
     .version = "v1",
     .resource = "deployments",
     .singular = "deployment",
     .kind = "Deployment",
     .list_kind = "DeploymentList",
     .skey = "apps/deployments",
     .namespaced = 1,
     .has_status = 1,
     .has_generation = 1,
     .short_names = {"deploy"},
     .categories = {"all"}},
    {.group = "policy",
     .version = "v1",
     .resource = "poddisruptionbudgets",
     .singular = "poddisruptionbudget",
     .kind = "PodDisruptionBudget",
     .list_kind = "PodDisruptionBudgetList",
     .skey = "policy/poddisruptionbudgets",
     .namespaced = 1,
     .has_status = 1,
     .has_generation = 1,
     .short_names = {"pdb"}},
    {.group = "networking.k8s.io",
     .version = "v1",
     .resource = "networkpolicies",
     .singular = "networkpolicy",
     .kind = "NetworkPolicy",
     .list_kind = "NetworkPolicyList",
     .skey = "networking.k8s.io/networkpolicies",
     .namespaced = 1,
     .has_generation = 1,
     .short_names = {"netpol"}},
    {.group = "rbac.authorization.k8s.io",
     .version = "v1",
     .resource = "clusterroles",
     .singular = "clusterrole",
     .kind = "ClusterRole",
     .list_kind = "ClusterRoleList",
     .skey = "rbac.authorization.k8s.io/clusterroles"},
    {.group = "rbac.authorization.k8s.io",
     .version = "v1",
     .resource = "clusterrolebindings",
     .singular = "clusterrolebinding",
     .kind = "ClusterRoleBinding",
     .list_kind = "ClusterRoleBindingList",
     .skey = "rbac.authorization.k8s.io/clusterrolebindings"},
    {.group = "rbac.authorization.k8s.io",
     .version = "v1",
     .resource = "roles",
     .singular = "role",
     .kind = "Role",
     .list_kind = "RoleList",
     .skey = "rbac.authorization.k8s.io/roles",
     .namespaced = 1},
    {.group = "rbac.authorization.k8s.io",
     .version = "v1",
     .resource = "rolebindings",
     .singular = "rolebinding",
     .kind = "RoleBinding",
     .list_kind = "RoleBindingList",
     .skey = "rbac.authorization.k8s.io/rolebindings",
     .namespaced = 1},
    {.group = "coordination.k8s.io",
     .version = "v1",
     .resource = "leases",
     .singular = "lease",
     .kind = "Lease",
     .list_kind = "LeaseList",
     .skey = "coordination.k8s.io/leases",
     .namespaced = 1,
     .create_on_update = 1},
    {.group = "admissionregistration.k8s.io",
     .version = "v1",
     .resource = "mutatingwebhookconfigurations",
     .singular = "mutatingwebhookconfiguration",
     .kind = "MutatingWebhookConfiguration",
     .list_kind = "MutatingWebhookConfigurationList",
     .skey = "admissionregistration.k8s.io/mutatingwebhookconfigurations",
     .has_generation = 1,
     .categories = {"api-extensions"}},
    {.group = "admissionregistration.k8s.io",
     .version = "v1",
     .resource = "validatingwebhookconfigurations",
     .singular = "validatingwebhookconfiguration",
     .kind = "ValidatingWebhookConfiguration",
     .list_kind = "ValidatingWebhookConfigurationList",
     .skey = "admissionregistration.k8s.io/validatingwebhookconfigurations",
     .has_generation = 1,
     .categories = {"api-extensions"}},
    {.group = "apiextensions.k8s.io",
     .version = "v1",
     .resource = "customresourcedefinitions",
     .singular = "customresourcedefinition",
     .kind = "CustomResourceDefinition",
     .list_kind = "CustomResourceDefinitionList",
     .skey = "apiextensions.k8s.io/customresourcedefinitions",
     .has_status = 1,
     .has_generation = 1,
     .short_names = {"crd", "crds"},
     .categories = {"api-extensions"}},
};

const rtype *rtype_builtins(size_t *n)
{
    *n = sizeof builtins / sizeof builtins[0];
    return builtins;
}

static void copy_str(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

void rtype_crd_skey(json_object *crd, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", si_str(crd, "spec.group") ? si_str(crd, "spec.group") : "",
             si_str(crd, "spec.names.plural") ? si_str(crd, "spec.names.plural") : "");
}

/* Pointers into the CRD (which the rtype keeps a reference to). */
static void fill_list(const char **dst, size_t max, json_object *arr)
{
    size_t n = 0;
    if (!arr || !json_object_is_type(arr, json_type_array))
        return;
    for (size_t i = 0; i < json_object_array_length(arr) && n < max; i++) {
        json_object *v = json_object_array_get_idx(arr, i);
        if (json_object_is_type(v, json_type_string))
            dst[n++] = json_object_get_string(v);
    }
}

typedef struct crd_find {
    const char *group, *version, *resource;
    rtype *out;
    int found;
} crd_find;

static int crd_visit(void *ctx, const char *ns, const char *name, json_object *crd)
{
    crd_find *f = ctx;
    const char *g = si_str(crd, "spec.group");
    const char *plural = si_str(crd, "spec.names.plural");
    if (!g || !plural || strcmp(g, f->group) || strcmp(plural, f->resource))
        return 0;
    json_object *versions = si_obj(si_obj(crd, "spec"), "versions");
    if (!versions || !json_object_is_type(versions, json_type_array))
        return 0;
    for (size_t i = 0; i < json_object_array_length(versions); i++) {
        json_object *v = json_object_array_get_idx(versions, i);
        const char *vn = si_str(v, "name");
        json_object *served = si_obj(v, "served");
        if (!vn || strcmp(vn, f->version) || !served || !json_object_get_boolean(served))
            continue;
        rtype *t = f->out;
        memset(t, 0, sizeof *t);
        copy_str(t->group, sizeof t->group, g);
        copy_str(t->version, sizeof t->version, vn);
        copy_str(t->resource, sizeof t->resource, plural);
        copy_str(t->singular, sizeof t->singular, si_str(crd, "spec.names.singular"));
        copy_str(t->kind, sizeof t->kind, si_str(crd, "spec.names.kind"));
        const char *lk = si_str(crd, "spec.names.listKind");
        if (lk)
            copy_str(t->list_kind, sizeof t->list_kind, lk);
        else
            snprintf(t->list_kind, sizeof t->list_kind, "%sList", t->kind);
        rtype_crd_skey(crd, t->skey, sizeof t->skey);
        const char *scope = si_str(crd, "spec.scope");
        t->namespaced = !scope || strcmp(scope, "Cluster") != 0;
        t->has_status = si_obj(si_obj(v, "subresources"), "status") != NULL;
        t->custom = 1;
        t->has_generation = 1;
        json_object *names = si_obj(si_obj(crd, "spec"), "names");
        fill_list(t->short_names, 7, si_obj(names, "shortNames"));
        fill_list(t->categories, 3, si_obj(names, "categories"));
        t->crd = json_object_get(crd);
        t->crd_version = v;
        f->found = 1;
        return 1;
    }
    return 0;
}

int rtype_lookup(const char *group, const char *version, const char *resource, rtype *out)
{
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++) {
        const rtype *b = &builtins[i];
        if (!strcmp(b->group, group) && !strcmp(b->version, version) &&
            !strcmp(b->resource, resource)) {
            *out = *b;
            return 0;
        }
    }
    if (!*group)
        return -1;
    crd_find f = {.group = group, .version = version, .resource = resource, .out = out};
    st_each("apiextensions.k8s.io/customresourcedefinitions", NULL, crd_visit, &f);
    return f.found ? 0 : -1;
}

void rtype_dispose(rtype *t)
{
    if (!t)
        return;
    json_object_put(t->crd);
    t->crd = NULL;
    t->crd_version = NULL;
}

void rtype_qualified(const rtype *t, char *buf, size_t n)
{
    if (*t->group)
        snprintf(buf, n, "%s.%s", t->resource, t->group);
    else
        snprintf(buf, n, "%s", t->resource);
}
