#!/usr/bin/env bash
# Limits per GPU model (GPUQuota spec.models) and a choice of models, through
# kube-apiserver, the webhooks, the controller and kube-scheduler:
#   - the CRD refuses a model name that is not a catalog name (CEL);
#   - 12 pods pinned to a100-80gb created 6 at a time against a100-80gb's
#     20Gi: exactly 5 exist, the others were denied naming the model, and the
#     controller's status.usedByModel says 20Gi;
#   - a pod that names no model is charged against every model's limit, so
#     it cannot take what is left of a100-80gb's budget by not naming it;
#     a pod pinned to a model the quota does not list needs only spec.hard;
#   - a pod accepting "a100-80gb,h100-80gb" lands on h100-80gb (annotation,
#     affinity, charge of a quarter of an h100) and kube-scheduler binds it
#     to the h100 kwok node; when no accepted model has room it is denied;
#   - kubectl get gq keeps its columns (with the queue's beside them);
#     kubectl describe shows the models.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

NS=e2e-models
N=12 FIT=5 PAR=6
scratch "$NS"

create() { kubectl -n "$NS" create -f - 2>&1 <<<"$1"; }
# model_pod NAME MODELS MEMORY-LIMITS: a pod with annotation gpuquota.io/gpu-model
model_pod() { pod_yaml "$1" "$3" "  annotations: {gpuquota.io/gpu-model: \"$2\"}"; }
model_used() { # model_used MODEL KEY: status.usedByModel[MODEL][KEY]
    kubectl -n "$NS" get gq team -o json | jq -r --arg m "$1" --arg k "$2" '.status.usedByModel[$m][$k] // ""'
}
model_used_is() { [[ $(model_used "$1" "$2") == "$3" ]]; }

ns "$NS" || { fail "namespace $NS"; finish; }

out=$(kubectl apply -f - 2>&1 <<EOF
apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: bad-model, namespace: $NS}
spec:
  models: {H100: {gpus: 1}}
EOF
)
check_match "a model name that is not a catalog name is refused by the CRD" \
    'model names are catalog names' "$out"

kubectl apply -f - >/dev/null <<EOF
apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: team, namespace: $NS}
spec:
  hard: {gpu-memory: 200Gi, gpu-pods: 50}
  models:
    a100-80gb: {gpu-memory: 20Gi}
    h100-80gb: {gpu-memory: 40Gi}
EOF
eventually 15 model_used_is a100-80gb gpu-memory 0
check "status.usedByModel starts at 0" 0 "$(model_used a100-80gb gpu-memory)"

# ---------------------------------------------------------------- concurrency
for ((i = 0; i < N; i++)); do
    model_pod "$(printf 'a-%02d' "$i")" a100-80gb 'gpuquota.io/gpu-memory: "4Gi"' >"$work/$(printf 'a-%02d' "$i").yaml"
done
# The webhooks read GPUQuotas from their informer caches.
models_seen() {
    denied_with 'a100-80gb/gpu-memory' "$NS" "$(model_pod probe a100-80gb 'gpuquota.io/gpu-memory: "24Gi"')"
}
eventually 15 models_seen
create_parallel "$NS" "$PAR" "$work"/a-*.yaml
tally 'denied the request: exceeded quota: team, requested: a100-80gb/gpu-memory=4Gi, used: a100-80gb/gpu-memory=20Gi, limited: a100-80gb/gpu-memory=20Gi$' "$work"/a-*.yaml
check "pinned pods admitted under the model's limit" "$FIT" "$created"
check "pinned pods denied naming the model" $((N - FIT)) "$denied"
check "pinned pods failing otherwise" 0 "$other"
check "pods that exist" "$FIT" "$(kubectl -n "$NS" get pods -o name | grep -c '^pod/a-')"
eventually 15 model_used_is a100-80gb gpu-memory 20Gi
check "status.usedByModel a100-80gb gpu-memory" 20Gi "$(model_used a100-80gb gpu-memory)"
check "status.used gpu-memory" 20Gi "$(used "$NS" team gpu-memory)"
check "status.usedByModel h100-80gb gpu-memory" 0 "$(model_used h100-80gb gpu-memory)"

# ---------------------------------------------------------------- unpinned
out=$(create "$(gpu_pod unpinned 4Gi)")
check_match "a pod that names no model is held to every model's limit" \
    'exceeded quota: team, requested: a100-80gb/gpu-memory=4Gi, used: a100-80gb/gpu-memory=20Gi, limited: a100-80gb/gpu-memory=20Gi$' \
    "$out"
check_match "a pod pinned to a model the quota does not list needs only spec.hard" \
    'pod/l4-pod created' "$(create "$(model_pod l4-pod l4 'gpuquota.io/gpu-memory: "4Gi"')")"
eventually 15 bash -c "[[ \$(kubectl -n $NS get gq team -o jsonpath='{.status.used.gpu-memory}') == 24Gi ]]"
check "the l4 pod counts in spec.hard's usage only" "24Gi 20Gi 0" \
    "$(used "$NS" team gpu-memory) $(model_used a100-80gb gpu-memory) $(model_used h100-80gb gpu-memory)"

# ---------------------------------------------------------------- a choice
choice='gpuquota.io/gpu-fraction: "0.25"'
choice_pod() {
    cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  annotations: {gpuquota.io/gpu-model: "a100-80gb,h100-80gb", $choice}
spec:
  containers:
  - name: main
    image: registry.example/cuda:12
EOF
}
# The mutating webhook chooses from its cached quota state: were it behind,
# /validate would deny the stale choice (nothing is created), so retry.
created_choice() { create "$(choice_pod "$1")" | grep -q "pod/$1 created"; }
eventually 30 created_choice two-models
pod=$(kubectl -n "$NS" get pod two-models -o json)
check "the choice is recorded" "h100-80gb a100-80gb,h100-80gb" \
    "$(jq -r '.metadata.annotations["gpuquota.io/gpu-model"] + " " + .metadata.annotations["gpuquota.io/gpu-model-choices"]' <<<"$pod")"
check "a quarter of an h100 is charged" "gpu-memory=20Gi,gpus=0,gpu-pods=1" \
    "$(jq -r '.metadata.annotations["gpuquota.io/charged"]' <<<"$pod")"
check "the affinity names exactly the h100's products" '["NVIDIA-H100-80GB-HBM3","NVIDIA-H100-PCIe"]' \
    "$(jq -c '[.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[] | select(.key == "nvidia.com/gpu.product") | .values[]] | sort' <<<"$pod")"
eventually 60 bash -c "[[ -n \$(kubectl -n $NS get pod two-models -o jsonpath='{.spec.nodeName}') ]]"
node=$(kubectl -n "$NS" get pod two-models -o jsonpath='{.spec.nodeName}')
check "kube-scheduler bound it to the h100 node" "NVIDIA-H100-80GB-HBM3" \
    "$(kubectl get node "$node" -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.product}')"
eventually 15 model_used_is h100-80gb gpu-memory 20Gi
check "status.usedByModel h100-80gb gpu-memory" 20Gi "$(model_used h100-80gb gpu-memory)"
eventually 30 created_choice two-models-2
check "a second one fills the h100 budget" "h100-80gb" \
    "$(kubectl -n "$NS" get pod two-models-2 -o jsonpath='{.metadata.annotations.gpuquota\.io/gpu-model}')"
out=$(create "$(choice_pod two-models-3)")
check_match "with no accepted model left, the pod is denied saying why for each" \
    'no accepted GPU model fits: a100-80gb: exceeded quota: team, requested: a100-80gb/gpu-memory=20Gi, used: a100-80gb/gpu-memory=20Gi, limited: a100-80gb/gpu-memory=20Gi; h100-80gb: exceeded quota: team, requested: h100-80gb/gpu-memory=20Gi, used: h100-80gb/gpu-memory=40Gi, limited: h100-80gb/gpu-memory=40Gi' \
    "$out"

# ---------------------------------------------------------------- kubectl views
check "kubectl get gq keeps its columns" \
    "NAME HARD-MEM USED-MEM HARD-GPUS USED-GPUS HARD-PODS USED-PODS QUEUED QUEUED-MEM READY AGE" \
    "$(kubectl -n "$NS" get gq team | head -1 | tr -s ' ')"
# The last admitted pod's charge may still be a reservation: the controller
# folds it into usedByModel within a second (docs/controller.md).
eventually 10 bash -c "[[ \$(kubectl -n $NS get gq team \
    -o jsonpath='{.status.usedByModel.h100-80gb.gpu-memory}') == 40Gi ]]"
desc=$(kubectl -n "$NS" describe gq team)
# section HEADER: the lines under "HEADER:" in the describe output, up to the
# next line indented as little as the header (one block, joined by spaces).
section() {
    awk -v h="$1:" '
        on && match($0, /^ */) && RLENGTH <= ind {exit}
        on {print}
        !on && $1 " " $2 " " $3 == h || (!on && $1 == h) {on = 1; match($0, /^ */); ind = RLENGTH}
    ' <<<"$desc" | tr -s ' \n' ' '
}
check_match "kubectl describe shows the limits per model, under Models" \
    '(^| )(A 100 - 80gb|a100-80gb): ' "$(section Models)"
check_match "kubectl describe shows the usage per model, under Used By Model" \
    '(^| )h100-80gb: Gpu - Memory: 40Gi( |$)' "$(section 'Used By Model')"

finish
