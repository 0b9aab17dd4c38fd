#!/usr/bin/env bash
# Pods pinned to a GPU model (annotation gpuquota.io/gpu-model) asking a
# fraction or an amount of memory, through the real kube-scheduler onto kwok
# GPU nodes:
#   - each is rewritten (aliyun.com/gpu-mem, the model's share), given the
#     required affinity on nvidia.com/gpu.product with exactly the catalog's
#     product strings, bound to a node of that model, and Running;
#   - the controller's status follows: used rises after each create, a
#     Job-owned pod that kwok completes (phase Succeeded) stops counting, a
#     delete lowers used. The create/delete -> status latency seen by a
#     client polling the GPUQuota is printed; only convergence within 15 s
#     is asserted.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

NS=e2e-schedule
cleanup() { kubectl delete namespace "$NS" --ignore-not-found --wait=true --timeout=120s >/dev/null; }
trap cleanup EXIT

now_ms() { date +%s%3N; }
latencies=()
# await_used WHAT KEY VALUE START_MS: poll status.used[KEY] (no sleep: each
# read is a kubectl round trip) until VALUE, at most 15 s; print the latency.
await_used() {
    local what=$1 key=$2 want=$3 t0=$4 deadline=$((SECONDS + 15)) got
    while :; do
        got=$(used "$NS" gq "$key")
        if [[ $got == "$want" ]]; then
            latencies+=("$what: $(($(now_ms) - t0)) ms;")
            pass "used $key = $want after $what ($(($(now_ms) - t0)) ms)"
            return 0
        fi
        if ((SECONDS >= deadline)); then
            fail "used $key after $what: expected [$want] within 15 s, got [$got]"
            return 1
        fi
    done
}
catalog_products() { # catalog_products MODEL: the GFD product strings of a catalog model, sorted
    "$GQ" config default | python3 -c 'import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)' |
        jq -r --arg m "$1" '.models[] | select(.name == $m) | .products[]' | sort
}
pod_json() { kubectl -n "$NS" get pod "$1" -o json; }
running() { [[ $(kubectl -n "$NS" get pod "$1" -o jsonpath='{.status.phase}') == Running ]]; }

# pinned_pod NAME MODEL RESOURCES-FLOW-MAP [EXTRA-ANNOTATIONS]
pinned_pod() {
    cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  annotations: {gpuquota.io/gpu-model: "$2"${4:+, $4}}
spec:
  containers:
  - name: main
    image: registry.example/cuda:12
    resources: $3
EOF
}

ns "$NS" || { fail "namespace $NS"; finish; }
quota "$NS" gq '{gpu-memory: 100Gi, gpu-pods: 10}'
eventually 15 bash -c "[[ \$(kubectl -n $NS get gpuquota gq -o jsonpath='{.status.used.gpu-pods}') == 0 ]]"
check "used gpu-pods of the new quota" 0 "$(used "$NS" gq gpu-pods)"

# name model resources extra-annotations | expected gpu-mem | node | cumulative used
specs=(
    's-a100|a100-80gb|{limits: {gpuquota.io/gpu-memory: 20Gi}}||20|NVIDIA-A100-SXM4-80GB|20Gi'
    's-a10|a10|{limits: {nvidia.com/gpu: "0.5"}}||12|NVIDIA-A10|32Gi'
    's-l4|l4|{}|gpuquota.io/gpu-fraction: "0.25"|6|NVIDIA-L4|38Gi'
    's-h100|h100-80gb|{limits: {nvidia.com/gpu: 250m}}||20|NVIDIA-H100-80GB-HBM3|58Gi'
)
n=0
for s in "${specs[@]}"; do
    IFS='|' read -r name model res ann mem product total <<<"$s"
    n=$((n + 1))
    t0=$(now_ms)
    out=$(pinned_pod "$name" "$model" "$res" "$ann" | kubectl -n "$NS" create -f - 2>&1)
    check_match "$name ($model) created" "pod/$name created" "$out"
    await_used "create $name" gpu-memory "$total" "$t0"
    check "used gpu-pods after $name" "$n" "$(used "$NS" gq gpu-pods)"
done

for s in "${specs[@]}"; do
    IFS='|' read -r name model res ann mem product total <<<"$s"
    p=$(pod_json "$name")
    check "$name managed" true "$(jq -r '.metadata.labels["gpuquota.io/managed"]' <<<"$p")"
    check "$name rewritten to aliyun.com/gpu-mem" "$mem" "$(jq -r '.spec.containers[0].resources.limits["aliyun.com/gpu-mem"]' <<<"$p")"
    check "$name charged" "gpu-memory=${mem}Gi,gpus=0,gpu-pods=1" "$(jq -r '.metadata.annotations["gpuquota.io/charged"]' <<<"$p")"
    check "$name affinity: nvidia.com/gpu.product In the $model products" \
        "$(catalog_products "$model")" \
        "$(jq -r '.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[]
            .matchExpressions[] | select(.key == "nvidia.com/gpu.product" and .operator == "In") | .values[]' <<<"$p" | sort)"
    eventually 60 running "$name"
    node=$(kubectl -n "$NS" get pod "$name" -o jsonpath='{.spec.nodeName}')
    label=$(kubectl get node "$node" -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.product}' 2>/dev/null)
    check "$name placed on a node of model $model ($node)" "$product" "$label"
    grep -qxF -- "$label" <(catalog_products "$model") &&
        pass "$name's node product $label is one of $model's" || fail "$name's node product [$label] is not one of $model's"
    check "$name Running" Running "$(kubectl -n "$NS" get pod "$name" -o jsonpath='{.status.phase}')"
done

# A Job's pod: counted while it exists, not once kwok completes it. A gate
# holds it until it has been counted, so the rise is seen.
t0=$(now_ms)
kubectl -n "$NS" create -f - >/dev/null <<EOF
apiVersion: batch/v1
kind: Job
metadata: {name: j1}
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations: {gpuquota.io/gpu-model: a10}
    spec:
      restartPolicy: Never
      schedulingGates: [{name: e2e.gpuquota.io/hold}]
$(containers 'gpuquota.io/gpu-memory: 4Gi' '      ')
EOF
check "Job j1 created" 0 $?
jobpod() { kubectl -n "$NS" get pods -l job-name=j1 -o jsonpath='{.items[0].metadata.name}' 2>/dev/null; }
eventually 60 jobpod
jp=$(jobpod)
check_match "j1 made a pod" '^j1-' "$jp"
await_used "Job j1's pod created" gpu-memory 62Gi "$t0"
check "used gpu-pods with j1's pod" 5 "$(used "$NS" gq gpu-pods)"
t0=$(now_ms)
kubectl -n "$NS" patch pod "$jp" --type=json -p '[{"op":"remove","path":"/spec/schedulingGates"}]' >/dev/null
check "j1's pod released" 0 $?
await_used "j1's pod released and completed" gpu-memory 58Gi "$t0"
check "j1's pod Succeeded" Succeeded "$(kubectl -n "$NS" get pod "$jp" -o jsonpath='{.status.phase}')"
check "j1's pod ran on an A10" NVIDIA-A10 \
    "$(kubectl get node "$(kubectl -n "$NS" get pod "$jp" -o jsonpath='{.spec.nodeName}')" -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.product}')"
check "used gpu-pods after j1 completed" 4 "$(used "$NS" gq gpu-pods)"
eventually 60 bash -c "[[ \$(kubectl -n $NS get job j1 -o jsonpath='{.status.succeeded}') == 1 ]]"
check "Job j1 succeeded" 1 "$(kubectl -n "$NS" get job j1 -o jsonpath='{.status.succeeded}')"

# Deletes lower used.
t0=$(now_ms)
kubectl -n "$NS" delete pod s-a100 --wait=false >/dev/null
await_used "delete s-a100" gpu-memory 38Gi "$t0"
t0=$(now_ms)
kubectl -n "$NS" delete pod s-l4 --wait=false >/dev/null
await_used "delete s-l4" gpu-memory 32Gi "$t0"
check "used gpu-pods after the deletes" 2 "$(used "$NS" gq gpu-pods)"

echo "# create/delete -> status latency seen: ${latencies[*]}"
finish
