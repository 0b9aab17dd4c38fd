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
#     allocationMode All.
#   - a ResourceClaim named directly (resourceClaimName) is priced the same
#     way and charged once per quota however many pods name it; gpu-pods
#     counts each pod; the controller frees it when its last pod goes; and
#     concurrent creates naming one claim never pass spec.hard.
#   - under whenExceeded: Queue the controller, which charges and ungates
#     queued pods, charges a shared claim once too, for pods and for the
#     members of a pod group.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

NS=e2e-dra
NS2=e2e-dra-shared
NS3=e2e-dra-queue
cleanup() {
    kubectl delete namespace "$NS" "$NS2" "$NS3" --ignore-not-found --wait=true --timeout=120s >/dev/null
    kubectl delete deviceclass gpu.nvidia.com --ignore-not-found >/dev/null 2>&1
}
trap cleanup EXIT

create() { kubectl -n "$NS" create -f - 2>&1 <<<"$1"; }
model_used() {
    kubectl -n "$NS" get gq team -o json | jq -r --arg m "$1" --arg k "$2" '.status.usedByModel[$m][$k] // ""'
}
# template NAME EXACTLY-FLOW-MAP
template() { dra_object ResourceClaimTemplate "$NS" "$1" "{spec: {devices: {requests: [{name: gpu, exactly: $2}]}}}"; }
# dra_object KIND NS NAME SPEC-FLOW-MAP: a resource.k8s.io/v1 object.
dra_object() {
    printf 'apiVersion: resource.k8s.io/v1\nkind: %s\nmetadata: {name: %s, namespace: %s}\nspec: %s\n' \
        "$1" "$3" "$2" "$4" | kubectl apply -f - >/dev/null
}
# claim_pod NAME FIELD REF [METADATA]: a pod whose container uses claim "gpu"
# (FIELD: resourceClaimTemplateName or resourceClaimName); METADATA: more
# flow-map entries of its metadata.
claim_pod() {
    cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1${4:+, $4}}
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
ns "$NS2" || { fail "namespace $NS2"; finish; }
ns "$NS3" || { fail "namespace $NS3"; finish; }
gpu_device_class
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
check "nothing refused was charged" "3" "$(used "$NS" team gpus)"

# --- a ResourceClaim shared by pods is charged once -------------------------
# Its devices and memory count once per quota however many pods name it,
# gpu-pods counts every pod; the claim stays charged until its last pod goes.
kubectl apply -f - >/dev/null <<EOF
apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: shared, namespace: $NS2}
spec:
  hard: {gpus: 2, gpu-memory: 160Gi, gpu-pods: 4}
EOF
# claim NAME COUNT [NS]: a ResourceClaim of COUNT H100s in NS ($NS2).
claim() {
    dra_object ResourceClaim "${3:-$NS2}" "$1" "{devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: $2,
        selectors: [{cel: {expression: 'device.attributes[\"gpu.nvidia.com\"].productName == \"NVIDIA-H100-80GB-HBM3\"'}}]}}]}}"
}
create2() { kubectl -n "$NS2" create -f - 2>&1 <<<"$1"; }
# usage [NS QUOTA]: "gpus gpu-memory gpu-pods" of status.used of QUOTA
# (shared) in NS ($NS2), as kubectl get gq -o json shows it.
usage() {
    kubectl -n "${1:-$NS2}" get gq "${2:-shared}" -o json |
        jq -r '.status.used // {} | "\(.gpus) \(.["gpu-memory"]) \(.["gpu-pods"])"'
}
usage_is() { [[ $(usage) == "$1" ]]; }
# The quota's claim records, "name:counted", sorted.
claim_records() {
    kubectl -n "$NS2" get gq shared -o json |
        jq -r '[.status.reservations // [] | .[] | select(.claim) | "\(.pod):\(.counted // false)"] | sort | join(" ")'
}
claim_records_are() { [[ $(claim_records) == "$1" ]]; }
eventually 60 usage_is "0 0 0"

claim pair 2
uid=$(kubectl -n "$NS2" get resourceclaim pair -o jsonpath='{.metadata.uid}')
out=""
for i in 1 2 3; do out+=" $(create2 "$(claim_pod "p-$i" resourceClaimName pair)")"; done
check "three pods naming one ResourceClaim are admitted" \
    " pod/p-1 created pod/p-2 created pod/p-3 created" "$out"
check "the claim is recorded with its name and uid" \
    "{\"gpu\":{\"gpus\":2,\"memory\":\"160Gi\",\"model\":\"h100-80gb\",\"claim\":\"pair\",\"uid\":\"$uid\"}}" \
    "$(kubectl -n "$NS2" get pod p-2 -o json | jq -r '.metadata.annotations["gpuquota.io/gpu-claims"]' | jq -c .)"
eventually 60 usage_is "2 160Gi 3"
check "its devices and memory count once, each pod counts" "2 160Gi 3" "$(usage)"
eventually 60 claim_records_are "pair:true"
check "the controller records the claim as counted" "pair:true" "$(claim_records)"
claim solo 1
check_match "a 4th pod naming another claim is denied past spec.hard" \
    'exceeded quota: shared, requested: gpu-memory=80Gi,gpus=1, used: gpu-memory=160Gi,gpus=2, limited: gpu-memory=160Gi,gpus=2$' \
    "$(create2 "$(claim_pod q-1 resourceClaimName solo)")"
check_match "a 4th pod naming the charged claim only adds itself" "pod/p-4 created" \
    "$(create2 "$(claim_pod p-4 resourceClaimName pair)")"
eventually 60 usage_is "2 160Gi 4"
check "four pods, one claim" "2 160Gi 4" "$(usage)"
out=$(create2 "$(claim_pod m-1 resourceClaimName nope)")
check_match "a pod naming a ResourceClaim that does not exist is denied where a quota governs" \
    'resourceClaimName "nope"\): gpuquota cannot tell which GPUs' "$out"
check_match "with a warning naming the claim" 'Warning: ResourceClaim "nope" does not exist' "$out"

kubectl -n "$NS2" delete pod p-1 p-2 --wait=true >/dev/null
eventually 60 usage_is "2 160Gi 2"
check "deleting pods keeps the claim charged while any pod names it" "2 160Gi 2" "$(usage)"
kubectl -n "$NS2" delete pod p-3 --wait=true >/dev/null
eventually 60 usage_is "2 160Gi 1"
check "down to its last pod" "2 160Gi 1 pair:true" "$(usage) $(claim_records)"
kubectl -n "$NS2" delete pod p-4 --wait=true >/dev/null
eventually 60 usage_is "0 0 0"
eventually 60 claim_records_are ""
check "the last pod gone, the controller frees the claim" "0 0 0 []" "$(usage) [$(claim_records)]"

# Concurrent creates: 8 pods naming one new claim and 4 naming claims of
# their own, all at once: the shared claim is charged once and nothing goes
# past spec.hard (gpus 2, the shared claim counting 1 however many name it;
# gpu-pods 4).
claim race 1
for i in 1 2 3 4; do claim "own-$i" 1; done
work=$(mktemp -d)
for i in $(seq 1 8); do claim_pod "r-$i" resourceClaimName race >"$work/r-$i.yaml"; done
for i in 1 2 3 4; do claim_pod "o-$i" resourceClaimName "own-$i" >"$work/o-$i.yaml"; done
(cd "$work" && ls -- *.yaml | xargs -P 12 -I{} sh -c \
    'kubectl -n "$0" create -f "{}" >"{}.out" 2>&1; echo $? >"{}.rc"' "$NS2")
admitted_r=$(cat "$work"/r-*.rc | grep -c '^0$')
admitted_o=$(cat "$work"/o-*.rc | grep -c '^0$')
rm -rf "$work"
echo "# concurrent: $admitted_r of 8 pods naming the shared claim, $admitted_o of 4 naming their own"
want_gpus=$((admitted_o + (admitted_r > 0 ? 1 : 0)))
within=no
((admitted_r + admitted_o <= 4 && want_gpus <= 2)) && within=yes
check "concurrent creates stay within spec.hard" "yes" "$within"
filled=no
((admitted_r + admitted_o == 4 || want_gpus == 2)) && filled=yes
want="$want_gpus $((want_gpus * 80))Gi $((admitted_r + admitted_o))"
[[ $want_gpus == 0 ]] && want="0 0 0"
eventually 60 usage_is "$want"
check "the controller counts the shared claim once" "$want" "$(usage)"
check "the race filled the quota (gpu-pods or gpus)" "yes" "$filled"

# Concurrent creates that fit only if the claim is charged once: 4 pods at
# once naming a new claim of 2 H100s, which takes all of spec.hard's gpus.
kubectl -n "$NS2" delete pods --all --wait=true >/dev/null
eventually 60 usage_is "0 0 0"
claim whole 2
work=$(mktemp -d)
for i in 1 2 3 4; do claim_pod "w-$i" resourceClaimName whole >"$work/w-$i.yaml"; done
(cd "$work" && ls -- *.yaml | xargs -P 4 -I{} sh -c \
    'kubectl -n "$0" create -f "{}" >"{}.out" 2>&1; echo $? >"{}.rc"' "$NS2")
admitted=$(cat "$work"/w-*.rc | grep -c '^0$')
[[ $admitted == 4 ]] || tail -n 1 "$work"/w-*.out
rm -rf "$work"
check "4 concurrent pods naming one claim that fills spec.hard are all admitted" "4" "$admitted"
eventually 60 usage_is "2 160Gi 4"
check "and counted with the claim once" "2 160Gi 4" "$(usage)"

# --- queued pods naming one claim: the controller charges it once ----------
# A Queue quota whose gpus the claim fills: every pod is gated at creation
# and the controller charges and ungates it. Charged once, the claim leaves
# room for all three pods (gpu-pods 4); charged per pod, only the first
# would ever start.
quota "$NS3" queued '{gpus: 2, gpu-memory: 160Gi, gpu-pods: 4}'
kubectl -n "$NS3" patch gq queued --type merge -p '{"spec":{"whenExceeded":"Queue"}}' >/dev/null
claim qpair 2 "$NS3"
gates3() { kubectl -n "$NS3" get pod "$1" -o json | jq -r '[.spec.schedulingGates[]?.name] | join(",")'; }
ungated3() { [[ -z $(gates3 "$1") ]]; }
usage3() { usage "$NS3" queued; }
usage3_is() { [[ $(usage3) == "$1" ]]; }
eventually 60 usage3_is "0 0 0"
# The webhooks read the quota from their caches: wait until they gate.
gated3() {
    claim_pod probe resourceClaimName qpair | kubectl -n "$NS3" create --dry-run=server -o json -f - |
        jq -e '.spec.schedulingGates'
}
eventually 30 gated3 || fail "the webhooks do not gate pods in $NS3"
out=""
for i in 1 2 3; do
    out+=" $(kubectl -n "$NS3" create -f - 2>&1 <<<"$(claim_pod "qp-$i" resourceClaimName qpair)")"
done
check "three queued pods naming one ResourceClaim are created" \
    " pod/qp-1 created pod/qp-2 created pod/qp-3 created" "$out"
for i in 1 2 3; do eventually 60 ungated3 "qp-$i"; done
check "the controller ungates all three" ",,," "$(for i in 1 2 3; do printf ,%s "$(gates3 "qp-$i")"; done)"
eventually 60 usage3_is "2 160Gi 3"
check "the claim counts once, each pod counts" "2 160Gi 3" "$(usage3)"

# A pod group is admitted all or nothing, so a claim its members share is
# planned once for the group: with one of two GPUs taken, a group of two
# pods naming one claim of one GPU fits (charged per member it would need
# three).
kubectl -n "$NS3" delete pods --all --wait=true >/dev/null
eventually 60 usage3_is "0 0 0"
claim single 1 "$NS3"
claim shared1 1 "$NS3"
check_match "a pod naming a claim of one GPU is created" "created" \
    "$(kubectl -n "$NS3" create -f - 2>&1 <<<"$(claim_pod solo resourceClaimName single)")"
eventually 60 ungated3 solo
eventually 60 usage3_is "1 80Gi 1"
out=""
group='labels: {gpuquota.io/pod-group: g}, annotations: {gpuquota.io/pod-group-size: "2"}'
for i in 1 2; do
    out+=" $(kubectl -n "$NS3" create -f - 2>&1 <<<"$(claim_pod "g-$i" resourceClaimName shared1 "$group")")"
done
check "a group of two pods naming one claim is created" " pod/g-1 created pod/g-2 created" "$out"
for i in 1 2; do eventually 60 ungated3 "g-$i"; done
check "the controller ungates the group" ",," "$(for i in 1 2; do printf ,%s "$(gates3 "g-$i")"; done)"
eventually 60 usage3_is "2 160Gi 3"
check "its claim counts once" "2 160Gi 3" "$(usage3)"

# /validate's "would it ever fit" check at creation counts a shared claim
# once for the group too: three members naming the claim of two GPUs under
# gpus: 2 are accepted (3 x 2 GPUs if each paid it) and all start; five
# members are refused, since gpu-pods: 4 can never hold them.
kubectl -n "$NS3" delete pods --all --wait=true >/dev/null
eventually 60 usage3_is "0 0 0"
out=""
group='labels: {gpuquota.io/pod-group: g3}, annotations: {gpuquota.io/pod-group-size: "3"}'
for i in 1 2 3; do
    out+=" $(kubectl -n "$NS3" create -f - 2>&1 <<<"$(claim_pod "g3-$i" resourceClaimName qpair "$group")")"
done
check "a group of three naming a claim that fills gpus is created" \
    " pod/g3-1 created pod/g3-2 created pod/g3-3 created" "$out"
for i in 1 2 3; do eventually 60 ungated3 "g3-$i"; done
check "the controller ungates the group of three" ",,," \
    "$(for i in 1 2 3; do printf ,%s "$(gates3 "g3-$i")"; done)"
eventually 60 usage3_is "2 160Gi 3"
check "the group's claim counts once" "2 160Gi 3" "$(usage3)"
group='labels: {gpuquota.io/pod-group: g5}, annotations: {gpuquota.io/pod-group-size: "5"}'
check_match "a group of five is refused: gpu-pods can never hold it" \
    'pod group g5 of 5 pods asks for gpu-pods=5, more than quota queued allows at all \(gpu-pods=4\)' \
    "$(kubectl -n "$NS3" create -f - 2>&1 <<<"$(claim_pod g5-1 resourceClaimName qpair "$group")")"

finish
