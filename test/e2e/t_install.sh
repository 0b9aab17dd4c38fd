#!/usr/bin/env bash
# deploy/ as kube-apiserver sees it: the CRDs are accepted and established,
# kubectl reaches the custom resources by every name, and invalid objects are
# refused by the schema and CEL rules with messages a user understands.
source "$ROOT/test/e2e/lib.sh"
trap 'kubectl delete namespace e2e-install --wait=false >/dev/null 2>&1' EXIT
ns e2e-install

for crd in gpuquotas gputenantquotas gpulimitranges; do
    check "CRD $crd is established" True \
        "$(kubectl get crd "$crd.gpuquota.io" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}')"
done

quota e2e-install team '{gpu-memory: 20Gi, gpu-pods: 4}'
check "kubectl get gpuquota NAME" team \
    "$(kubectl -n e2e-install get gpuquota team -o jsonpath='{.metadata.name}' 2>&1)"
check "kubectl get gq NAME" team "$(kubectl -n e2e-install get gq team -o jsonpath='{.metadata.name}' 2>&1)"
check_match "kubectl describe gpuquota NAME" "Kind: +GPUQuota" \
    "$(kubectl -n e2e-install describe gpuquota team 2>&1)"
check_match "kubectl patch gpuquota NAME" "patched" \
    "$(kubectl -n e2e-install patch gpuquota team --type=merge -p '{"spec":{"hard":{"gpu-memory":"24Gi"}}}' 2>&1)"
check "the patch took" 24Gi "$(kubectl -n e2e-install get gpuquota team -o jsonpath='{.spec.hard.gpu-memory}')"
check_match "printer columns show HARD and USED" "^NAME +HARD-MEM +USED-MEM +HARD-GPUS +USED-GPUS +HARD-PODS +USED-PODS" \
    "$(kubectl -n e2e-install get gq 2>&1 | head -1)"
check_match "the category lists gpuquota's kinds" "gpuquota.gpuquota.io/team" \
    "$(kubectl -n e2e-install get gpuquota-all 2>&1)"

# expect_invalid NAME ERE MANIFEST: kubectl apply is refused with a message matching ERE.
expect_invalid() {
    local out
    if out=$(printf '%s\n' "$3" | kubectl apply -f - 2>&1); then
        fail "$1: accepted: $out"
    else
        check_match "$1" "$2" "$out"
    fi
}
q() { printf 'apiVersion: gpuquota.io/v1alpha1\nkind: GPUQuota\nmetadata: {name: bad, namespace: e2e-install}\nspec:\n  hard: %s\n' "$1"; }
expect_invalid "GPUQuota hard 'lots' is refused" \
    'spec.hard.gpu-memory: Invalid value: .*not lots' "$(q '{gpu-memory: lots}')"
expect_invalid "GPUQuota hard -10Gi is refused" \
    'spec.hard.gpu-memory: .*must be a whole, non-negative quantity such as 64Gi or 8, not -10Gi' \
    "$(q '{gpu-memory: "-10Gi"}')"
expect_invalid "GPUQuota gpus 1.5 is refused" 'spec.hard.gpus: .*not 1.5' "$(q '{gpus: "1.5"}')"
expect_invalid "a misspelt key is refused by kubectl's strict decoding" \
    'unknown field "spec.hard.gpu-memroy"' "$(q '{gpu-memroy: 10Gi}')"
expect_invalid "GPULimitRange min above max is refused" \
    'min gpu-memory must be less than or equal to max gpu-memory' \
    "$(limit_range_yaml e2e-install bad '[{type: Container, min: {gpu-memory: 20Gi}, max: {gpu-memory: 10Gi}}]')"
expect_invalid "GPULimitRange default on type Pod is refused" \
    'default may only be set for type Container' \
    "$(limit_range_yaml e2e-install bad '[{type: Pod, default: {gpu-memory: 5Gi}}]')"
expect_invalid "GPULimitRange default 0 is refused" \
    'default gpu-memory must be greater than 0' \
    "$(limit_range_yaml e2e-install bad '[{type: Container, default: {gpu-memory: "0"}}]')"
expect_invalid "GPUTenantQuota without namespaces is refused" \
    'a GPUTenantQuota needs namespaces or namespaceSelector' "apiVersion: gpuquota.io/v1alpha1
kind: GPUTenantQuota
metadata: {name: bad-e2e}
spec:
  hard: {gpu-memory: 10Gi}"
expect_invalid "GPUQuota with conflicting scopes is refused" \
    'conflicting scopes Terminating and NotTerminating' \
    "$(q '{gpu-memory: 10Gi}'; printf '  scopes: [Terminating, NotTerminating]\n')"

# Kubernetes keeps 100Ti as a decimal, not an int64, and CEL's isInteger()
# says false for it: large whole amounts must still be accepted.
for big in 100Ti 100000Gi 2Pi; do
    check_match "GPUQuota hard $big is accepted" "patched" \
        "$(kubectl -n e2e-install patch gpuquota team --type=merge -p "{\"spec\":{\"hard\":{\"gpu-memory\":\"$big\"}}}" 2>&1)"
done
expect_invalid "a fraction of a byte is refused" 'spec.hard.gpu-memory: .*not 1500m' "$(q '{gpu-memory: 1500m}')"

check_match "kubectl delete gpuquota NAME" 'deleted' "$(kubectl -n e2e-install delete gpuquota team 2>&1)"

# Every example under deploy/examples/quotas is accepted as it ships.
kubectl create namespace team-a >/dev/null 2>&1
out=$(kubectl apply --dry-run=server -f "$ROOT/deploy/examples/quotas/" 2>&1)
rc=$?
kubectl delete namespace team-a --wait=false >/dev/null 2>&1
check "deploy/examples/quotas is accepted (server dry run): kubectl exits 0" "0" "$rc"
check "and prints no error" "" "$(grep -i 'error' <<<"$out")"
finish
