#!/usr/bin/env bash
# GPUs asked through DRA (resource.k8s.io/v1, served by default in 1.34) are
# charged like any other GPU pod:
#   - pods whose ResourceClaimTemplate asks for devices of the GPU DeviceClass
#     gpu.nvidia.com are rewritten with the devices recorded
#     (gpuquota.io/gpu-claims), charged as gpus and memory of the model the
#     selector names, held to that model's limits and to spec.hard, and
#     counted by the controller. (kwok nodes publish no ResourceSlices, so
#     the pods stay Pending: charging is what is tested.)
#   - what gpuquota cannot price is refused where a quota governs:
#     allocationMode All, and a ResourceClaim shared by pods.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

NS=e2e-dra
cleanup() {
    kubectl delete namespace "$NS" --ignore-not-found --wait=true --timeout=120s >/dev/null
    kubectl delete deviceclass gpu.nvidia.com --ignore-not-found >/dev/null 2>&1
}
trap cleanup EXIT

create() { kubectl -n "$NS" create -f - 2>&1 <<<"$1"; }
model_used() {
    kubectl -n "$NS" get gq team -o json | jq -r --arg m "$1" --arg k "$2" '.status.usedByModel[$m][$k] // ""'
}
# template NAME EXACTLY-FLOW-MAP
template() {
    kubectl apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: $1, namespace: $NS}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: $2
EOF
}
# claim_pod NAME FIELD REF: a pod whose container uses claim "gpu" (FIELD:
# resourceClaimTemplateName or resourceClaimName).
claim_pod() {
    cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  resourceClaims:
  - {name: gpu, $2: $3}
  containers:
  - name: main
    image: registry.example/cuda:12
    resources:
      claims: [{name: gpu}]
EOF
}

check_match "the apiserver serves resource.k8s.io/v1" "resourceclaimtemplates" \
    "$(kubectl api-resources --api-group=resource.k8s.io -o name 2>&1 | tr '\n' ' ')"
ns "$NS" || { fail "namespace $NS"; finish; }
kubectl apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.nvidia.com"'}
EOF
kubectl apply -f - >/dev/null <<EOF
apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: team, namespace: $NS}
spec:
  hard: {gpus: 3}
  models:
    h100-80gb: {gpus: 2}
EOF
template one-h100 "{deviceClassName: gpu.nvidia.com, count: 1, selectors: [{cel: {expression: 'device.attributes[\"gpu.nvidia.com\"].productName == \"NVIDIA-H100-80GB-HBM3\"'}}]}"
template one-l4 "{deviceClassName: gpu.nvidia.com, selectors: [{cel: {expression: 'device.attributes[\"gpu.nvidia.com\"].productName == \"NVIDIA-L4\"'}}]}"
template every-gpu "{deviceClassName: gpu.nvidia.com, allocationMode: All}"
eventually 15 bash -c "[[ \$(kubectl -n $NS get gq team -o jsonpath='{.status.used.gpus}') == 0 ]]"

check_match "a pod with a ResourceClaimTemplate of a GPU class is admitted" "pod/h-1 created" \
    "$(create "$(claim_pod h-1 resourceClaimTemplateName one-h100)")"
pod=$(kubectl -n "$NS" get pod h-1 -o json)
check "its devices are recorded" '{"gpu":{"gpus":1,"memory":"80Gi","model":"h100-80gb"}}' \
    "$(jq -r '.metadata.annotations["gpuquota.io/gpu-claims"]' <<<"$pod" | jq -c .)"
check "and charged" "gpu-memory=80Gi,gpus=1,gpu-pods=1 true" \
    "$(jq -r '.metadata.annotations["gpuquota.io/charged"] + " " + .metadata.labels["gpuquota.io/managed"]' <<<"$pod")"
check_match "a second one fits the model's limit" "pod/h-2 created" \
    "$(create "$(claim_pod h-2 resourceClaimTemplateName one-h100)")"
check_match "a third is denied by the model's limit" \
    'exceeded quota: team, requested: h100-80gb/gpus=1, used: h100-80gb/gpus=2, limited: h100-80gb/gpus=2$' \
    "$(create "$(claim_pod h-3 resourceClaimTemplateName one-h100)")"
check_match "another model fits spec.hard" "pod/l-1 created" \
    "$(create "$(claim_pod l-1 resourceClaimTemplateName one-l4)")"
check_match "past spec.hard a claim pod is denied" \
    'exceeded quota: team, requested: gpus=1, used: gpus=3, limited: gpus=3$' \
    "$(create "$(claim_pod l-2 resourceClaimTemplateName one-l4)")"
eventually 15 bash -c "[[ \$(kubectl -n $NS get gq team -o jsonpath='{.status.used.gpus}') == 3 ]]"
check "the controller counts the claims" "3 2" "$(used "$NS" team gpus) $(model_used h100-80gb gpus)"
check "the claim pods wait for devices (kwok publishes no ResourceSlices)" "Pending" \
    "$(kubectl -n "$NS" get pod h-1 -o jsonpath='{.status.phase}')"

out=$(create "$(claim_pod all-1 resourceClaimTemplateName every-gpu)")
check_match "allocationMode All is refused where a quota governs" \
    'spec.resourceClaims\[0\] "gpu" \(resourceClaimTemplateName "every-gpu"\): gpuquota cannot tell which GPUs' "$out"
check_match "with a warning that says why" 'Warning: .*allocationMode All' "$out"
kubectl apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared, namespace: $NS}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
EOF
check_match "a ResourceClaim shared by pods is refused where a quota governs" \
    'a ResourceClaim shared by pods is not charged yet' \
    "$(create "$(claim_pod s-1 resourceClaimName shared)")"
check "nothing refused was charged" "3" "$(used "$NS" team gpus)"

finish
