#!/usr/bin/env bash
# Honest re-applies work: a tenant (edit role, its own token) applies a GPU
# pod manifest that gpuquota rewrites at CREATE, then applies the same
# manifest again — client-side and server-side, as GitOps tools do — and an
# image bump. kube-apiserver would refuse each ("pod updates may not change
# fields": the manifest still says nvidia.com/gpu 250m) and so would the
# tamper check (the manifest still lists GPU models where gpuquota stored
# its choice), unless /mutate puts back what is stored (quota/update.h).
# A manifest that really changes the request is still refused.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

NS=e2e-reapply
TKC=$(mktemp)
cleanup() {
    kubectl delete namespace "$NS" --ignore-not-found --wait=true --timeout=120s >/dev/null
    rm -f "$TKC" "$TKC".*
}
trap cleanup EXIT
ns "$NS" || { fail "namespace $NS"; finish; }
tenant_kubeconfig "$NS" dev "$TKC" || { fail "tenant kubeconfig"; finish; }
tk() { kubectl --kubeconfig "$TKC" -n "$NS" "$@"; }
quota "$NS" q '{gpu-memory: 64Gi}'

# manifest NAME IMAGE LIMIT [ANNOTATIONS-FLOW-MAP]: a pod as a tenant writes it.
manifest() {
    cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  annotations: ${4:-{gpuquota.io/gpu-model: a100-40gb\}}
spec:
  containers:
  - name: main
    image: $2
    resources: {limits: {$3}}
EOF
}
limits() { tk get pod "$1" -o jsonpath='{.spec.containers[0].resources.limits}'; }

for mode in client server; do
    flags=()
    [[ $mode == server ]] && flags=(--server-side --field-manager=gitops)
    p=frac-$mode
    manifest "$p" registry.example/cuda:12 'nvidia.com/gpu: 250m' >"$TKC.$p"
    check_match "$mode-side apply creates the fractional pod" "$p (created|serverside-applied)" \
        "$(tk apply "${flags[@]}" -f "$TKC.$p" 2>&1)"
    check_match "rewritten to the backend's memory units" '"aliyun.com/gpu-mem":"10"' "$(limits "$p")"
    check_match "$mode-side apply of the same manifest succeeds" "$p (unchanged|configured|serverside-applied)" \
        "$(tk apply "${flags[@]}" -f "$TKC.$p" 2>&1)"
    check_match "the pod keeps what gpuquota wrote" '^\{"aliyun.com/gpu-mem":"10"\}$' "$(limits "$p")"
    manifest "$p" registry.example/cuda:12.1 'nvidia.com/gpu: 250m' >"$TKC.$p"
    check_match "$mode-side apply of an image bump succeeds" "$p (configured|serverside-applied)" \
        "$(tk apply "${flags[@]}" -f "$TKC.$p" 2>&1)"
    check "with the new image" "registry.example/cuda:12.1" \
        "$(tk get pod "$p" -o jsonpath='{.spec.containers[0].image}')"
    manifest "$p" registry.example/cuda:12.1 'nvidia.com/gpu: 500m' >"$TKC.$p"
    check_match "$mode-side apply of another amount is still refused" 'may not change fields|Forbidden' \
        "$(tk apply "${flags[@]}" -f "$TKC.$p" 2>&1)"
    check_match "and changes nothing" '^\{"aliyun.com/gpu-mem":"10"\}$' "$(limits "$p")"

    p=choice-$mode
    manifest "$p" registry.example/cuda:12 'gpuquota.io/gpu-memory: 8Gi' \
        '{gpuquota.io/gpu-model: "a100-80gb,h100-80gb"}' >"$TKC.$p"
    check_match "$mode-side apply creates a pod accepting two models" "$p (created|serverside-applied)" \
        "$(tk apply "${flags[@]}" -f "$TKC.$p" 2>&1)"
    check "gpuquota chose the first" "a100-80gb" \
        "$(tk get pod "$p" -o jsonpath='{.metadata.annotations.gpuquota\.io/gpu-model}')"
    check_match "$mode-side apply of the same manifest succeeds" "$p (unchanged|configured|serverside-applied)" \
        "$(tk apply "${flags[@]}" -f "$TKC.$p" 2>&1)"
    check "the choice stays" "a100-80gb" \
        "$(tk get pod "$p" -o jsonpath='{.metadata.annotations.gpuquota\.io/gpu-model}')"
done
check_match "a tenant still cannot pick another model afterwards" \
    'changing gpuquota.io/ labels and annotations is reserved to gpuquota' \
    "$(tk annotate pod choice-client --overwrite gpuquota.io/gpu-model=h100-80gb 2>&1)"
is() { [[ $("$@" 2>/dev/null) == 36Gi ]]; }
eventually 30 is used "$NS" q gpu-memory
check "charged once each, as admitted (2 x 10Gi, 2 x 8Gi)" "36Gi" "$(used "$NS" q gpu-memory)"

finish
