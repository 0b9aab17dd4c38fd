#!/usr/bin/env bash
# Per-model limits and a choice of models under whenExceeded: Queue
# (docs/queueing.md, docs/models-and-dra.md), on the real control plane:
#   1. a Queue quota limiting a100-80gb: queued a100 pods start only as the
#      model's usage frees, never above its limit (sampled), their Event
#      names the model; a pod of a model the quota does not list starts on
#      spec.hard; a pod that could never fit the model is denied at creation.
#   2. a pod accepting "a100-80gb,h100-80gb" is gated without a choice; the
#      controller picks the first model with room when it ungates it, pins
#      it (annotations and node affinity in the ungate patch) and
#      kube-scheduler places it on that model's node; one that fits no model
#      waits, and starts on a100-80gb when a100-80gb frees; nobody else may
#      rewrite the model of a gated pod; a listed model the pod could never
#      fit is refused at creation.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
NSM=e2e-queue-models NSC=e2e-queue-choice
trap 'kubectl delete namespace $NSM $NSC --wait=false >/dev/null 2>&1; [[ -n ${sampler:-} ]] && kill "$sampler" 2>/dev/null' EXIT

ns "$NSM"
# queue_quota NS MODELS-FLOW-MAP: Queue GPUQuota "team" with room in spec.hard
# for everything; only its per-model limits bind.
queue_quota() {
    kubectl apply -f - >/dev/null <<EOF
apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: team, namespace: $1}
spec: {hard: {gpu-memory: 200Gi}, whenExceeded: Queue, models: $2}
EOF
}
queue_quota "$NSM" '{a100-80gb: {gpu-memory: 16Gi}}'

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


# ------------------------------------------- 2. a choice of models, at ungate
ns "$NSC"
queue_quota "$NSC" '{a100-80gb: {gpu-memory: 8Gi}, h100-80gb: {gpu-memory: 8Gi}}'
NSM=$NSC # the helpers above, in this namespace
ann() { kubectl -n "$NSC" get pod "$1" -o json | jq -r --arg k "$2" '.metadata.annotations[$k] // ""'; }
pinned_product() {
    kubectl -n "$NSC" get pod "$1" -o json | jq -r '[.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[]?.matchExpressions[]? | select(.key == "nvidia.com/gpu.product") | .values[]] | join(",")'
}
seen_c() { mpod probe a100-80gb,h100-80gb 8Gi | kubectl -n "$NSC" create --dry-run=server -o json -f - | jq -e '.spec.schedulingGates'; }
eventually 15 seen_c
out=$(mpod probe a100-80gb,h100-80gb 8Gi | kubectl -n "$NSC" create --dry-run=server -o json -f - 2>/dev/null)
check "/mutate gates a choice under Queue and leaves the list unchosen" \
    'gpuquota.io/quota a100-80gb,h100-80gb' \
    "$(jq -r '[.spec.schedulingGates[].name] | join(",")' <<<"$out") $(jq -r '.metadata.annotations["gpuquota.io/gpu-model"]' <<<"$out")"
check "and pins no node affinity yet" "" "$(jq -r '.spec.affinity.nodeAffinity // empty' <<<"$out")"
out=$(create c-never a100-80gb,h100-80gb 16Gi)
check_match "a listed model the pod could never fit is refused at creation, named" \
    'GPU model a100-80gb of annotation gpuquota.io/gpu-model .*more than quota team allows at all \(a100-80gb/gpu-memory=8Gi\)' "$out"

check_match "c0 (pinned to a100-80gb) is created" created "$(create c0 a100-80gb 8Gi)"
eventually 15 ungated c0
eventually 20 model_used_is a100-80gb 8Gi
check_match "c1 (a100-80gb or h100-80gb) is created" created "$(create c1 a100-80gb,h100-80gb 8Gi)"
eventually 15 ungated c1
check "the controller chose h100-80gb, the first model with room" h100-80gb "$(ann c1 gpuquota.io/gpu-model)"
check "and recorded the list" a100-80gb,h100-80gb "$(ann c1 gpuquota.io/gpu-model-choices)"
check_match "with node affinity on h100-80gb's product, in the ungate patch" 'H100' "$(pinned_product c1)"
eventually 30 scheduled c1
check_match "kube-scheduler places it on the h100 node" '^gpu-h100-' "$(node_of c1)"
eventually 20 model_used_is h100-80gb 8Gi
check "status.usedByModel charges h100-80gb" 8Gi "$(model_used h100-80gb)"

next_second
check_match "c2 (a100-80gb or h100-80gb) is created" created "$(create c2 a100-80gb,h100-80gb 8Gi)"
eventually 15 has_ev c2
check_match "c2 waits while no model has room; its Event names the first choice's limit" \
    '^exceeded quota: team, requested: a100-80gb/gpu-memory=8Gi, used: a100-80gb/gpu-memory=8Gi, limited: a100-80gb/gpu-memory=8Gi$' "$(ev c2)"
check "c2 is still gated and unchosen" "gpuquota.io/quota a100-80gb,h100-80gb" "$(gates c2) $(ann c2 gpuquota.io/gpu-model)"
check "gpuquota queue lists it, charged on its first model until chosen" '["c2","8Gi"]' \
    "$("$GQ" queue -n "$NSC" --config "$E2E/config.yaml" -o json | jq -c '[.queues[].pods[] | select(.name == "c2") | .name, .charge["gpu-memory"]]')"
out=$(kubectl -n "$NSC" annotate pod c2 --overwrite gpuquota.io/gpu-model=h100-80gb 2>&1)
check_match "nobody but gpuquota chooses the model of a gated pod" \
    'denied the request: changing gpuquota.io/ labels and annotations is reserved to gpuquota \(annotation gpuquota.io/gpu-model\)' "$out"
sleep 1
check "kube-scheduler leaves it alone" "" "$(node_of c2)"
gone c0
eventually 15 ungated c2
check "c2 starts on a100-80gb once c0 frees it" a100-80gb "$(ann c2 gpuquota.io/gpu-model)"
eventually 30 scheduled c2
check_match "placed on the a100 node" '^gpu-a100-80gb-' "$(node_of c2)"

finish
