#!/usr/bin/env bash
# Every webhook replica down (deploy/webhooks.yaml: failurePolicy Fail,
# scoped by matchConditions):
#   - a GPU pod is refused, with kubectl naming the webhook: quota is never
#     skipped;
#   - a CPU-only pod (in a namespace with a GPUQuota and in one without) and
#     a pod asking nvidia.com/gpu "0" are created: the outage never touches
#     pods that ask for no GPU;
#   - pods that gpuquota rewrote before the outage keep living: status
#     updates, a scheduling gate removed, binding, kwok marking one Ready;
#   - once the replicas are back the GPU pod is admitted.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

NSA=e2e-outage-a NSB=e2e-outage-b

cleanup() {
    local n pid
    for n in 0 1 2; do
        pid=$(cat "$E2E/webhook-$n.pid" 2>/dev/null)
        if [[ -z $pid ]] || ! pid_alive "$pid"; then
            webhooks 3
            break
        fi
    done
    kubectl delete namespace "$NSA" "$NSB" --ignore-not-found --wait=true --timeout=120s >/dev/null
}
trap cleanup EXIT

now_ms() { date +%s%3N; }
cpu_pod() { pod_yaml "$1" "cpu: 100m, memory: 64Mi${2:+, $2}"; }
# gated_gpu_pod NAME MEMORY: a GPU pod held back from scheduling by a gate of ours.
gated_gpu_pod() {
    cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  schedulingGates: [{name: e2e.gpuquota.io/hold}]
  containers:
  - name: main
    image: registry.example/cuda:12
    resources:
      limits: {gpuquota.io/gpu-memory: "$2"}
EOF
}
label() { kubectl -n "$1" get pod "$2" -o jsonpath='{.metadata.labels.gpuquota\.io/managed}' 2>/dev/null; }
ready() { [[ $(kubectl -n "$1" get pod "$2" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]; }

ns "$NSA" || { fail "namespace $NSA"; finish; }
ns "$NSB" || { fail "namespace $NSB"; finish; }
quota "$NSA" team '{gpu-memory: 40Gi, gpu-pods: 10}'

# Before the outage: two rewritten pods, one Running, one held by a gate.
gpu_pod m1 4Gi | kubectl -n "$NSA" create -f - >/dev/null 2>&1
check "$NSA/m1 created before the outage" 0 $?
gated_gpu_pod m2 4Gi | kubectl -n "$NSA" create -f - >/dev/null 2>&1
check "$NSA/m2 (gated) created before the outage" 0 $?
check "m1 is managed" true "$(label "$NSA" m1)"
check "m2 is managed" true "$(label "$NSA" m2)"
eventually 30 ready "$NSA" m1
check "m1 Ready before the outage" True "$(kubectl -n "$NSA" get pod m1 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')"
check "m2 Pending behind its gate" Pending "$(kubectl -n "$NSA" get pod m2 -o jsonpath='{.status.phase}')"

# ---------------------------------------------------------------- outage
for n in 0 1 2; do webhook_stop "$n"; done
check "no webhook replica runs" "" "$(cat "$E2E"/webhook-*.pid 2>/dev/null)"

out=$(gpu_pod g1 4Gi | kubectl -n "$NSA" create -f - 2>&1)
rc=$?
check "GPU pod refused in $NSA (quota) during the outage: exit status" 1 "$rc"
check_match "kubectl's error names the webhook" \
    'Internal error occurred: failed calling webhook "mutate\.gpuquota\.io": failed to call webhook' "$out"
check "$NSA/g1 does not exist" "" "$(kubectl -n "$NSA" get pod g1 -o name 2>/dev/null)"
out=$(gpu_pod g2 4Gi | kubectl -n "$NSB" create -f - 2>&1)
check_match "GPU pod refused in $NSB (no quota) too: the rewrite is never skipped" \
    'failed calling webhook "mutate\.gpuquota\.io"' "$out"

t0=$(now_ms)
out=$(cpu_pod c1 | kubectl -n "$NSA" create -f - 2>&1)
check_match "CPU-only pod created in $NSA (quota) during the outage ($(($(now_ms) - t0)) ms)" '^pod/c1 created$' "$out"
out=$(cpu_pod c2 | kubectl -n "$NSB" create -f - 2>&1)
check_match "CPU-only pod created in $NSB during the outage" '^pod/c2 created' "$out"
out=$(cpu_pod z1 'nvidia.com/gpu: "0"' | kubectl -n "$NSA" create -f - 2>&1)
check_match "pod asking nvidia.com/gpu \"0\" created during the outage" '^pod/z1 created' "$out"
check "z1 passes untouched (not managed)" "" "$(label "$NSA" z1)"
check "z1 keeps nvidia.com/gpu 0" 0 "$(kubectl -n "$NSA" get pod z1 -o jsonpath='{.spec.containers[0].resources.limits.nvidia\.com/gpu}')"

# Status of a rewritten pod: a condition written through pods/status.
out=$(kubectl -n "$NSA" patch pod m1 --subresource=status --type=strategic \
    -p '{"status":{"conditions":[{"type":"e2e.gpuquota.io/Probe","status":"True","reason":"Outage","message":"written while every webhook replica was down"}]}}' \
    -o jsonpath='{.status.conditions[?(@.type=="e2e.gpuquota.io/Probe")].reason}' 2>&1)
check "status update of managed m1 during the outage" Outage "$out"
# A managed pod released from its gate: the update, the binding by
# kube-scheduler and kwok's status writes all go through.
out=$(kubectl -n "$NSA" patch pod m2 --type=json -p '[{"op":"remove","path":"/spec/schedulingGates"}]' 2>&1)
check_match "scheduling gate removed from managed m2 during the outage" 'pod/m2 patched' "$out"
eventually 60 ready "$NSA" m2
check_match "m2 bound to a node during the outage" '^gpu-' "$(kubectl -n "$NSA" get pod m2 -o jsonpath='{.spec.nodeName}')"
check "m2 turned Ready during the outage" True "$(kubectl -n "$NSA" get pod m2 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')"
check "m2 keeps its gpuquota label" true "$(label "$NSA" m2)"

# ---------------------------------------------------------------- recovery
webhooks 3 || fail "webhook replicas did not restart"
# kube-apiserver learns the new endpoints from the EndpointSlices: wait until
# a server-side dry run goes through, then create for real.
t0=$(now_ms)
# (A function, not bash -c: gpu_pod calls pod_yaml and containers, which a
# child shell given gpu_pod alone would not have, so every try failed.)
dry_run_g1() { gpu_pod g1 4Gi | kubectl -n "$NSA" create --dry-run=server -f -; }
eventually 60 dry_run_g1 || fail "a server dry run of a GPU pod went through within 60 s of the restart"
echo "# webhooks reachable through kube-apiserver $(($(now_ms) - t0)) ms after the restart"
out=$(gpu_pod g1 4Gi | kubectl -n "$NSA" create -f - 2>&1)
check_match "GPU pod admitted once the replicas are back" 'pod/g1 created' "$out"
check "g1 is managed" true "$(label "$NSA" g1)"
check "g1 rewritten" 4 "$(kubectl -n "$NSA" get pod g1 -o jsonpath='{.spec.containers[0].resources.limits.aliyun\.com/gpu-mem}')"
used_is() { [[ $(used "$1" "$2" "$3") == "$4" ]]; }
eventually 20 used_is "$NSA" team gpu-memory 12Gi
check "$NSA used gpu-memory: m1, m2, g1" 12Gi "$(used "$NSA" team gpu-memory)"
check "$NSA used gpu-pods" 3 "$(used "$NSA" team gpu-pods)"

finish
