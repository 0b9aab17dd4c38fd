#!/usr/bin/env bash
# Per-model limits and a choice of models under whenExceeded: Queue
# (docs/queueing.md, docs/models-and-dra.md), on the real control plane:
#   1. a Queue quota limiting a100-80gb: queued a100 pods start only as the
#      model's usage frees, never above its limit (sampled), their Event
#      names the model; a pod of a model the quota does not list starts on
#      spec.hard; a pod that could never fit the model is denied at creation.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
NSM=e2e-queue-models
trap 'kubectl delete namespace $NSM --wait=false >/dev/null 2>&1; [[ -n ${sampler:-} ]] && kill "$sampler" 2>/dev/null' EXIT

ns "$NSM"
kubectl apply -f - >/dev/null <<EOF
apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: team, namespace: $NSM}
spec:
  hard: {gpu-memory: 200Gi}
  whenExceeded: Queue
  models:
    a100-80gb: {gpu-memory: 16Gi}
EOF

# mpod NAME MODELS MEMORY: a pod accepting MODELS (gpuquota.io/gpu-model).
mpod() {
    pod_yaml "$1" "gpuquota.io/gpu-memory: \"$3\"" "  annotations: {gpuquota.io/gpu-model: \"$2\"}"
}
create() { mpod "$@" | kubectl -n "$NSM" create -f - 2>&1; }
gates() { kubectl -n "$NSM" get pod "$1" -o json | jq -r '[.spec.schedulingGates[]?.name] | join(",")'; }
node_of() { kubectl -n "$NSM" get pod "$1" -o jsonpath='{.spec.nodeName}'; }
ungated() { [[ -z $(gates "$1") ]]; }
scheduled() { [[ -n $(node_of "$1") ]]; }
gone() { kubectl -n "$NSM" delete pod "$1" --grace-period=0 --force >/dev/null 2>&1; }
ev() { kubectl -n "$NSM" get events --field-selector "involvedObject.name=$1,reason=Queued" -o jsonpath='{.items[*].message}'; }
has_ev() { [[ -n $(ev "$1") ]]; }
model_used() { kubectl -n "$NSM" get gq team -o json | jq -r --arg m "$1" '.status.usedByModel[$m]["gpu-memory"] // ""'; }
model_used_is() { [[ $(model_used "$1") == "$2" ]]; }
# Ungated a100 pods' memory in Gi (each asks for 8Gi), as kube-apiserver holds the pods.
a100_running_gi() {
    kubectl -n "$NSM" get pods -o json | jq '[.items[] | select(.metadata.annotations["gpuquota.io/gpu-model"] == "a100-80gb")
        | select(([.spec.schedulingGates[]?.name] | index("gpuquota.io/quota")) == null)] | length * 8'
}

seen() { mpod probe a100-80gb 8Gi | kubectl -n "$NSM" create --dry-run=server -o json -f - | jq -e '.spec.schedulingGates'; }
eventually 15 seen

# ------------------------------------------------ 1. per-model limits hold
out=$(create never a100-80gb 24Gi)
check_match "a pod above the model's limit is denied at creation" \
    'pod asks for a100-80gb/gpu-memory=24Gi, more than quota team allows at all \(a100-80gb/gpu-memory=16Gi\): it would wait forever' "$out"

# Sample the ungated a100 memory every 0.2 s while the queue drains.
: >"$E2E/queue-models-samples"
(while :; do a100_running_gi >>"$E2E/queue-models-samples" 2>/dev/null; sleep 0.2; done) &
sampler=$!

check_match "a1 is created" created "$(create a1 a100-80gb 8Gi)"
check_match "a2 is created" created "$(create a2 a100-80gb 8Gi)"
eventually 15 ungated a1
eventually 15 ungated a2
next_second
check_match "a3 is created" created "$(create a3 a100-80gb 8Gi)"
next_second
check_match "a4 is created" created "$(create a4 a100-80gb 8Gi)"
check_match "h1 (a model the quota does not list) is created" created "$(create h1 h100-80gb 8Gi)"
eventually 15 ungated h1
check "a pod of an unlisted model starts on spec.hard alone" "" "$(gates h1)"
eventually 15 has_ev a3
check_match "a queued a100 pod's Event names the model" \
    '^exceeded quota: team, requested: a100-80gb/gpu-memory=8Gi, used: a100-80gb/gpu-memory=16Gi, limited: a100-80gb/gpu-memory=16Gi$' \
    "$(ev a3)"
check "a3 and a4 stay gated while a100-80gb is full" "gpuquota.io/quota gpuquota.io/quota" "$(gates a3) $(gates a4)"
eventually 20 model_used_is a100-80gb 16Gi
check "status.usedByModel counts the two running a100 pods" 16Gi "$(model_used a100-80gb)"

gone a1
eventually 15 ungated a3
check "a3 starts once a1 frees the model" "" "$(gates a3)"
sleep 1
check "a4 still waits: the model is full again" "gpuquota.io/quota" "$(gates a4)"
gone a2
eventually 15 ungated a4
check "a4 starts once a2 frees the model" "" "$(gates a4)"
eventually 30 scheduled a4
check_match "kube-scheduler places it on an a100 node" "^gpu-a100-80gb-" "$(node_of a4)"
kill "$sampler" 2>/dev/null
wait "$sampler" 2>/dev/null
sampler=
max=$(sort -n "$E2E/queue-models-samples" | tail -1)
n=$(wc -l <"$E2E/queue-models-samples")
echo "samples: $n, most a100 memory ungated at once: ${max}Gi"
check "never above a100-80gb's 16Gi (sampled every 0.2 s)" yes "$( ((n >= 3 && max <= 16)) && echo yes || echo "no: $n samples, max $max")"

finish
