#!/usr/bin/env bash
# Limit ranges, quotas and tenants through kube-apiserver and real kubectl:
# what a user sees in kubectl's output, server dry runs evaluated and not
# charged, and tampering by a tenant refused.
source "$ROOT/test/e2e/lib.sh"
trap 'kubectl delete namespace e2e-lr e2e-q e2e-ta e2e-tb --wait=false >/dev/null 2>&1
      kubectl delete gputenantquota e2e-ml --ignore-not-found >/dev/null 2>&1' EXIT

# create NS POD-YAML: kubectl create's combined output.
create() { kubectl -n "$1" create -f - 2>&1 <<<"$2"; }
pinned() { gpu_pod "$1" "$2" "  annotations: {gpuquota.io/gpu-model: $3}"; }
whole_gpu_pod() {
    cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  containers:
  - name: main
    image: registry.example/cuda:12
    resources: {limits: {nvidia.com/gpu: "1"}}
  - name: cpu
    image: registry.example/proxy:1
    resources: {limits: {cpu: 100m}}
EOF
}

# ----------------------------------------------------------- GPULimitRange
ns e2e-lr
limit_range e2e-lr limits '[{type: Container, min: {gpu-memory: 2Gi}, max: {gpu-memory: 20Gi},
    default: {gpu-memory: 10Gi}, allowedModels: [a100-80gb, h100-80gb]}]'
# The webhook reads GPULimitRanges from its informer cache.
lr_seen() { denied_with 'maximum gpu-memory' e2e-lr "$(pinned probe 30Gi a100-80gb)"; }
eventually 10 lr_seen
out=$(create e2e-lr "$(whole_gpu_pod shared-by-default | sed 's/name: main/name: main/; s/metadata: {name: shared-by-default}/metadata: {name: shared-by-default, annotations: {gpuquota.io\/gpu-model: a100-80gb}}/')")
check_match "a whole GPU becomes the limit range's default slice" "created" "$out"
pod=$(kubectl -n e2e-lr get pod shared-by-default -o json)
check "the GPU container asks for the 10Gi default" '{"aliyun.com/gpu-mem":"10"}' \
    "$(jq -c '.spec.containers[0].resources.limits' <<<"$pod")"
check "the CPU container is left alone" '{"cpu":"100m"}' \
    "$(jq -c '.spec.containers[1].resources.limits' <<<"$pod")"
check_match "max is enforced with LimitRange's wording" \
    'denied the request: maximum gpu-memory usage per Container is 20Gi, but limit is 24Gi' \
    "$(create e2e-lr "$(pinned too-big 24Gi a100-80gb)")"
check_match "min is enforced with LimitRange's wording" \
    'denied the request: minimum gpu-memory usage per Container is 2Gi, but request is 1Gi' \
    "$(create e2e-lr "$(pinned too-small 1Gi a100-80gb)")"
check_match "a model outside allowedModels is refused" \
    'GPU model "a10" is not allowed in namespace "e2e-lr"; allowed: a100-80gb, h100-80gb' \
    "$(create e2e-lr "$(pinned wrong-model 4Gi a10)")"
check_match "a pod with no model is refused where models are restricted" \
    'GPU model must be set \(annotation gpuquota.io/gpu-model\) in namespace "e2e-lr"' \
    "$(create e2e-lr "$(gpu_pod no-model 4Gi)")"

# ---------------------------------------------------------------- GPUQuota
ns e2e-q
quota e2e-q team '{gpu-memory: 20Gi, gpu-pods: 5}'
check_match "a pod within the quota is admitted" "created" "$(create e2e-q "$(gpu_pod a 16Gi)")"
check_match "a server dry run over the quota is denied" \
    'exceeded quota: team, requested: gpu-memory=8Gi, used: gpu-memory=16Gi, limited: gpu-memory=20Gi' \
    "$(gpu_pod b 8Gi | kubectl -n e2e-q create --dry-run=server -f - 2>&1)"
check_match "a pod over the quota is denied with ResourceQuota's wording" \
    'admission webhook "validate.gpuquota.io" denied the request: exceeded quota: team, requested: gpu-memory=8Gi, used: gpu-memory=16Gi, limited: gpu-memory=20Gi' \
    "$(create e2e-q "$(gpu_pod b 8Gi)")"
# A fitting server dry run is evaluated, answered, and never charged.
check_match "a fitting server dry run is allowed" "created \(server dry run\)" \
    "$(gpu_pod c 4Gi | kubectl -n e2e-q create --dry-run=server -f - 2>&1)"
eventually 15 bash -c "[[ \$(kubectl -n e2e-q get gq team -o jsonpath='{.status.used.gpu-memory}') == 16Gi ]]"
check "the dry run charged nothing" "16Gi 0" \
    "$(used e2e-q team gpu-memory) $(reservations e2e-q team)"
check_match "the real pod still fits" "created" "$(create e2e-q "$(gpu_pod c 4Gi)")"
check_match "and the quota is full at equality" 'exceeded quota: team' \
    "$(create e2e-q "$(gpu_pod d 1Gi)")"
check_match "a CPU pod is not governed" "created" \
    "$(kubectl -n e2e-q run cpu --image=registry.example/app:1 2>&1)"

# ---------------------------------------------------------- tamper checks
kubectl -n e2e-q create serviceaccount tenant >/dev/null
kubectl -n e2e-q create rolebinding tenant-edit --clusterrole=edit \
    --serviceaccount=e2e-q:tenant >/dev/null
as_tenant=(--as=system:serviceaccount:e2e-q:tenant)
check_match "a tenant cannot remove the managed label" \
    'denied the request: changing gpuquota.io/ labels and annotations is reserved to gpuquota' \
    "$(kubectl -n e2e-q "${as_tenant[@]}" label pod a gpuquota.io/managed- 2>&1)"
check_match "a tenant cannot rewrite the charged annotation" \
    'denied the request: changing gpuquota.io/ labels and annotations is reserved to gpuquota' \
    "$(kubectl -n e2e-q "${as_tenant[@]}" annotate pod a --overwrite gpuquota.io/charged=gpu-memory=0 2>&1)"
check_match "a tenant cannot add a gpuquota label to another pod" \
    'denied the request: changing gpuquota.io/ labels and annotations is reserved to gpuquota' \
    "$(kubectl -n e2e-q "${as_tenant[@]}" label pod cpu gpuquota.io/managed=true 2>&1)"
check_match "a tenant may still edit its own labels" "labeled" \
    "$(kubectl -n e2e-q "${as_tenant[@]}" label pod a team=vision 2>&1)"

# ----------------------------------------------------------- tenant quota
ns e2e-ta e2e-tenant=ml
ns e2e-tb e2e-tenant=ml
kubectl apply -f - >/dev/null <<'EOF'
apiVersion: gpuquota.io/v1alpha1
kind: GPUTenantQuota
metadata: {name: e2e-ml}
spec:
  namespaceSelector: {matchLabels: {e2e-tenant: ml}}
  hard: {gpu-memory: 12Gi}
EOF
tenant_seen() { denied_with 'tenant quota' e2e-tb "$(gpu_pod probe 13Gi)"; }
eventually 10 tenant_seen
check_match "the tenant's first namespace fits" "created" "$(create e2e-ta "$(gpu_pod a 8Gi)")"
check_match "the tenant's second namespace is charged against the same quota" \
    'exceeded tenant quota: e2e-ml, requested: gpu-memory=8Gi, used: gpu-memory=8Gi, limited: gpu-memory=12Gi' \
    "$(create e2e-tb "$(gpu_pod b 8Gi)")"
check_match "what still fits is admitted" "created" "$(create e2e-tb "$(gpu_pod c 4Gi)")"
eventually 15 bash -c "[[ \$(kubectl get gtq e2e-ml -o jsonpath='{.status.used.gpu-memory}') == 12Gi ]]"
check "the tenant's status adds both namespaces" "12Gi" \
    "$(kubectl get gtq e2e-ml -o jsonpath='{.status.used.gpu-memory}')"
check "and breaks them down" "e2e-ta=8Gi e2e-tb=4Gi" \
    "$(kubectl get gtq e2e-ml -o json | jq -r '[.status.namespaces[] | "\(.namespace)=\(.used["gpu-memory"])"] | sort | join(" ")')"
finish
