#!/usr/bin/env bash
# Least privilege: what each of gpuquota's ServiceAccounts may do, as
# kube-apiserver's RBAC authorizer answers `kubectl auth can-i --list` with
# deploy/ applied, is exactly the list below, each right next to the code
# that uses it. A right granted beyond the list fails, and so does one the
# list needs that deploy/rbac.yaml no longer grants. The rights every
# account has (kube-apiserver's discovery and self-review roles, and
# deploy/rbac-users.yaml's read of the configuration for all authenticated
# users) are those of an account gpuquota never binds, and are left out.
source "$ROOT/test/e2e/lib.sh"
other=e2e-rbac
trap 'kubectl delete namespace "$other" --wait=false >/dev/null 2>&1;
      kubectl delete clusterrolebinding e2e-rbac-extra --ignore-not-found >/dev/null 2>&1' EXIT
ns "$other"

# RESOURCE[NAMES] VERB, or a non-resource URL and its verb. "ns:" marks a
# right held in gpuquota's namespace only (a Role there).
webhook_rights=(
    # webhook/kubestore.c: the quota caches (kube_cache: list, then watch);
    # a live read of a namespace's quotas the cache has not caught up with
    # (live_fetch: list); a charge reads its quota afresh (ks_get_quota: get).
    "gpuquotas.gpuquota.io get"
    "gpuquotas.gpuquota.io list"
    "gpuquotas.gpuquota.io watch"
    "gputenantquotas.gpuquota.io get"
    "gputenantquotas.gpuquota.io list"
    "gputenantquotas.gpuquota.io watch"
    # The limit-range cache and its live read (kube_cache, live_fetch).
    "gpulimitranges.gpuquota.io list"
    "gpulimitranges.gpuquota.io watch"
    # /validate charges: the status subresource's update (ks_update_status).
    "gpuquotas.gpuquota.io/status update"
    "gputenantquotas.gpuquota.io/status update"
    # The namespace cache (list, watch); a namespace it has not seen is read
    # live (live_fetch: get).
    "namespaces get"
    "namespaces list"
    "namespaces watch"
    # /mutate prices DRA pods: the templates and claims a pod names and the
    # DeviceClasses behind them (ks_get_claim_template, ks_get_claim,
    # ks_get_device_class).
    "resourceclaimtemplates.resource.k8s.io get"
    "resourceclaims.resource.k8s.io get"
    "deviceclasses.resource.k8s.io get"
    # /validate: a create naming a pod that exists is refused uncharged
    # (ks_get_pod); a pod group's members are listed to compare its size
    # (ks_list_group_pods).
    "pods get"
    "pods list"
)
controller_rights=(
    # controller/controller.c: the pod cache (list, watch); a pod is read
    # afresh before its gate goes (ungate.c, claims.c: get) and its gates
    # removed by a JSON Patch (ungate.c, claims.c: patch).
    "pods get"
    "pods list"
    "pods watch"
    "pods patch"
    # controller/preempt.c: a victim is marked DisruptionTarget (a JSON Patch
    # of pods/status) and evicted through the Eviction API (create).
    "pods/status patch"
    "pods/eviction create"
    # The namespace cache: tenants select namespaces by their labels.
    "namespaces list"
    "namespaces watch"
    # controller/claims.c: claims behind the gate gpuquota.io/claims are read
    # (get) and pinned (patch); pins are found by label (list); a claim's
    # DeviceClass says whether it asks for GPUs (class_kind: get).
    "resourceclaims.resource.k8s.io get"
    "resourceclaims.resource.k8s.io list"
    "resourceclaims.resource.k8s.io patch"
    "deviceclasses.resource.k8s.io get"
    # controller/controller.c: the longest timeout of the other validating
    # webhooks bounds a reservation's wait for its pod (list).
    "validatingwebhookconfigurations.admissionregistration.k8s.io list"
    # The quota caches (list, watch), a quota read afresh before its status
    # is written (controller.c, ungate.c: get) and the write (update_status).
    "gpuquotas.gpuquota.io get"
    "gpuquotas.gpuquota.io list"
    "gpuquotas.gpuquota.io watch"
    "gputenantquotas.gpuquota.io get"
    "gputenantquotas.gpuquota.io list"
    "gputenantquotas.gpuquota.io watch"
    "gpuquotas.gpuquota.io/status update"
    "gputenantquotas.gpuquota.io/status update"
    # controller/ctl_run.c: the Exceeded and queueing Events (core/v1, created).
    "events create"
    # kube/kube_leader.c: the leader Lease, in gpuquota's namespace: read,
    # renewed or taken over (update), made again if deleted (create).
    "ns:leases.coordination.k8s.io get"
    "ns:leases.coordination.k8s.io create"
    "ns:leases.coordination.k8s.io update"
)

# rights USER NS: USER's rights in NS from `kubectl auth can-i --list`, one
# "RESOURCE[NAMES] VERB" (or "URL VERB") a line, sorted.
rights() {
    kubectl auth can-i --list --as="$1" -n "$2" | python3 -c '
import re, sys
out = set()
for line in sys.stdin.read().splitlines()[1:]:
    m = re.match(r"^(\S*)\s+\[([^\]]*)\]\s+\[([^\]]*)\]\s+\[([^\]]*)\]\s*$", line)
    if not m:
        sys.exit("cannot read can-i line: " + line)
    res, urls, names, verbs = m.groups()
    what = res + ("[" + names + "]" if names else "") if res else urls
    for v in verbs.split():
        out.add(what + " " + v)
print("\n".join(sorted(out)))'
}

# granted SA NS: SA's rights in NS less those of an account nothing binds.
granted() {
    comm -23 <(rights "system:serviceaccount:$NS_SYS:$1" "$2") \
        <(rights "system:serviceaccount:$other:gpuquota-rbac-unbound" "$2")
}

# expected NS RIGHTS...: the list as it holds in NS.
expected() {
    local where=$1 r
    shift
    for r in "$@"; do
        if [[ $r == ns:* ]]; then
            [[ $where == "$NS_SYS" ]] && echo "${r#ns:}"
        else
            echo "$r"
        fi
    done | sort -u
}

# compare SA NS RIGHTS...: "+ right" for each one granted beyond the list,
# "- right" for each one the list needs and is not granted; nothing if equal.
compare() {
    local sa=$1 where=$2
    shift 2
    diff <(expected "$where" "$@") <(granted "$sa" "$where") | sed -n 's/^> /+ /p; s/^< /- /p'
}

# Every ServiceAccount of gpuquota's namespace has a list here.
check "gpuquota's namespace holds exactly the accounts listed" \
    "default gpuquota-controller gpuquota-webhook" \
    "$(kubectl -n "$NS_SYS" get serviceaccounts -o jsonpath='{.items[*].metadata.name}' | tr ' ' '\n' | sort | xargs)"

for where in "$NS_SYS" "$other"; do
    check "gpuquota-webhook in $where: exactly the rights its code uses" "" \
        "$(compare gpuquota-webhook "$where" "${webhook_rights[@]}")"
    check "gpuquota-controller in $where: exactly the rights its code uses" "" \
        "$(compare gpuquota-controller "$where" "${controller_rights[@]}")"
done
check "the default account of gpuquota's namespace has no right of its own" "" \
    "$(compare default "$NS_SYS")"
check "neither account may change a webhook configuration" "no no no no" \
    "$(for sa in gpuquota-webhook gpuquota-controller; do
        for r in mutatingwebhookconfigurations validatingwebhookconfigurations; do
            kubectl auth can-i patch "$r/gpuquota" --as="system:serviceaccount:$NS_SYS:$sa" 2>/dev/null
        done
    done | xargs)"

# The comparison sees a right granted beyond the list, and one missing.
kubectl create clusterrolebinding e2e-rbac-extra --clusterrole=view \
    --serviceaccount="$NS_SYS:gpuquota-webhook" >/dev/null
check_match "a right beyond the list fails the comparison" '^\+ configmaps get' \
    "$(compare gpuquota-webhook "$NS_SYS" "${webhook_rights[@]}" | grep -m1 '^+ configmaps get$')"
kubectl delete clusterrolebinding e2e-rbac-extra >/dev/null
check "a right the list needs and is not granted fails it" "- secrets get" \
    "$(compare gpuquota-webhook "$NS_SYS" "${webhook_rights[@]}" "secrets get")"
finish
