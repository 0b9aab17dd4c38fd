#!/usr/bin/env bash
# The DRA claims a pod runs on are the claims it was charged for
# (docs/models-and-dra.md, "Claims checked before the pod runs"), proven as
# a tenant with the edit role (a ServiceAccount token), with
# kube-controller-manager making template claims, kube-scheduler allocating
# devices from a ResourceSlice of 8 H100s on the kwok node gpu-h100-0, and
# kwok running what is bound:
#   - an honest pod naming a ResourceClaim is held behind gpuquota.io/claims
#     until the controller has checked and pinned the claim, then scheduled
#     on its device; the pin goes once the claim is reserved for it;
#   - item 4 of the tenant attacks: a claim deleted after admission and made
#     again under its name with 8 devices (the pod held meanwhile by the
#     tenant's own gate) used to run the pod on 8 H100s while the quota
#     counted 1. The checked claim is pinned: its deletion waits, no claim
#     of that name can be made, the tenant cannot lift the pin, and the pod
#     is never scheduled; the claim goes when the pod does;
#   - the same swap before the controller's check (controllers paused): the
#     pod is left gated with a ClaimNotCharged Event naming both uids;
#   - a template's claim asking more than the template did at admission (the
#     tenant's own claim of 8 devices, adopted by kube-controller-manager for
#     the template entry; the record says 1): left gated;
#   - nobody but gpuquota lifts gpuquota.io/claims;
#   - what the checks cannot cover is refused at creation: a claim pod
#     created on its node (kube-controller-manager would reserve for it a
#     claim made again after its admission, once another pod had it
#     allocated), a pod naming one claim twice (its devices would stay
#     allocated to no pod), a claim created with gpuquota's pin (it could
#     never be deleted, nor its namespace).
#   - a second round found three more, each now refused: a firstAvailable
#     request priced by its dearest alternative as a whole (7 H100s first,
#     4 of unknown model second, charged 4 devices); a request selector
#     that names a NIC driver in a form true for any driver, on a class that
#     pins none (charged 0 GPUs); a claim named directly and adopted by
#     kube-controller-manager for a template entry of the same pod (the
#     scheduler cannot reserve it twice; its devices stayed allocated to no
#     pod).
# (Those were found by a tenant acting against earlier versions of the
# check.)
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

NS=e2e-claims
NODE=gpu-h100-0
KCM_PID=$E2E/cluster/kube-controller-manager.pid
resume_all() {
    local f
    for f in "$E2E"/controller-*.pid "$KCM_PID"; do
        [[ -f $f ]] && kill -CONT "$(cat "$f")" 2>/dev/null
    done
    return 0
}
cleanup() {
    resume_all
    kubectl delete namespace "$NS" --ignore-not-found --wait=true --timeout=120s
    kubectl delete resourceslice e2e-claims-h100 --ignore-not-found >/dev/null 2>&1
    kubectl delete deviceclass gpu.nvidia.com e2e-claims-any --ignore-not-found >/dev/null 2>&1
    rm -f "$TKC"
}
TKC=$(mktemp)
trap cleanup EXIT

ns "$NS" || { fail "namespace $NS"; finish; }
tenant_kubeconfig "$NS" tenant "$TKC" || { fail "tenant kubeconfig"; finish; }
tk() { kubectl --kubeconfig "$TKC" -n "$NS" "$@"; }
is() { [[ $("$@" 2>/dev/null) == "$EXPECT" ]]; }
has() { [[ $("$@" 2>/dev/null) =~ $EXPECT_MATCH ]]; }

quota "$NS" devices '{gpus: 8}'
gpu_device_class
# 8 H100s on the kwok node, as NVIDIA's DRA driver would publish them.
{
    printf 'apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: e2e-claims-h100}\n'
    printf 'spec:\n  driver: gpu.nvidia.com\n  nodeName: %s\n' "$NODE"
    printf '  pool: {name: %s, generation: 1, resourceSliceCount: 1}\n  devices:\n' "$NODE"
    for i in 0 1 2 3 4 5 6 7; do
        printf '  - {name: gpu-%s, attributes: {productName: {string: NVIDIA-H100-80GB-HBM3}},' "$i"
        printf ' capacity: {memory: {value: 80Gi}}}\n'
    done
} | kubectl apply -f -

H100='device.attributes["gpu.nvidia.com"].productName == "NVIDIA-H100-80GB-HBM3"'
# claim NAME COUNT: a ResourceClaim of COUNT H100s, as the tenant.
claim() {
    tk create -f - 2>&1 <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $1}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: $2,
  selectors: [{cel: {expression: '$H100'}}]}}]}}
EOF
}
template() {
    tk apply -f - >/dev/null 2>&1 <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: $1}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com,
  count: $2, selectors: [{cel: {expression: '$H100'}}]}}]}}}
EOF
}
# claim_pod NAME FIELD REF [GATES]: a pod using claim entry "gpu".
claim_pod() {
    tk create -f - 2>&1 <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  ${4:+schedulingGates: $4}
  resourceClaims: [{name: gpu, $2: $3}]
  tolerations: [{operator: Exists}]
  containers:
  - {name: main, image: registry.example/cuda:12, resources: {claims: [{name: gpu}]}}
EOF
}
gates() { kubectl -n "$NS" get pod "$1" -o jsonpath='{.spec.schedulingGates[*].name}' 2>/dev/null; }
node_of() { kubectl -n "$NS" get pod "$1" -o jsonpath='{.spec.nodeName}' 2>/dev/null; }
finalizers() {
    kubectl -n "$NS" get resourceclaim "$1" -o jsonpath='{.metadata.finalizers[*]}' 2>/dev/null
}
pinned_for() {
    kubectl -n "$NS" get resourceclaim "$1" \
        -o jsonpath='{.metadata.annotations.gpuquota\.io/pinned-for}' 2>/dev/null
}
claim_uid() { kubectl -n "$NS" get resourceclaim "$1" -o jsonpath='{.metadata.uid}' 2>/dev/null; }
pod_events() {
    kubectl -n "$NS" get events --field-selector "involvedObject.name=$1,reason=$2" \
        -o jsonpath='{.items[*].message}' 2>/dev/null
}
pause() {
    local f
    for f in "$@"; do kill -STOP "$(cat "$f")"; done
}
resume() {
    local f
    for f in "$@"; do kill -CONT "$(cat "$f")"; done
}

# ------------------------------------------------------- an honest pod
check_match "the tenant makes a claim of one H100" "created" "$(claim one 1)"
out=$(claim_pod honest resourceClaimName one)
check_match "a pod naming it is admitted" "created" "$out"
EXPECT=1 eventually 30 is used "$NS" devices gpus || true
check "it is charged one GPU" "1" "$(used "$NS" devices gpus)"
EXPECT=$NODE eventually 60 is node_of honest || true
check "once its claim is checked, kube-scheduler places it on the H100 node" "$NODE" \
    "$(node_of honest)"
check "gpuquota's gate is gone" "" "$(gates honest)"
check "the claim is allocated for it" "honest" \
    "$(kubectl -n "$NS" get resourceclaim one -o jsonpath='{.status.reservedFor[*].name}')"
EXPECT="resource.kubernetes.io/delete-protection" eventually 30 is finalizers one || true
check "reserved for the pod, the claim is no longer gpuquota's to pin" \
    "resource.kubernetes.io/delete-protection" "$(finalizers one)"

# --------------------------- 4. the claim made again after admission
check_match "the tenant makes claim swap with one H100" "created" "$(claim swap 1)"
uid0=$(claim_uid swap)
out=$(claim_pod held resourceClaimName swap '[{name: tenant.example/hold}]')
check_match "a pod naming it, held by the tenant's own gate, is admitted" "created" "$out"
EXPECT="tenant.example/hold" eventually 30 is gates held || true
check "gpuquota lifts its own gate once the claim is checked" "tenant.example/hold" "$(gates held)"
check_match "and pins the claim" "gpuquota.io/charged-claim" "$(finalizers swap)"
check_match "for that pod" "\"$(kubectl -n "$NS" get pod held -o jsonpath='{.metadata.uid}')\":\"held\"" \
    "$(pinned_for swap)"
check_match "the tenant may not lift the pin" "denied the request: the finalizer gpuquota.io/charged-claim is removed by gpuquota only" \
    "$(tk patch resourceclaim swap --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]' 2>&1)"
check_match "nor change its record" "reserved to gpuquota \(annotation gpuquota.io/pinned-for\)" \
    "$(tk annotate resourceclaim swap gpuquota.io/pinned-for- 2>&1)"
check_match "the tenant deletes the claim" "deleted" "$(tk delete resourceclaim swap --wait=false 2>&1)"
check "its deletion waits for the pin" "$uid0" "$(claim_uid swap)"
check_match "no claim of that name can be made with 8 H100s" "AlreadyExists|already exists|being deleted" \
    "$(claim swap 8)"
check_match "claim ctl of one H100, for a control pod" "created" "$(claim ctl 1)"
check_match "the tenant lifts its own gate" "patched" \
    "$(tk patch pod held --type=json -p '[{"op":"remove","path":"/spec/schedulingGates/0"}]' 2>&1)"
check_match "and creates the control pod" "created" "$(claim_pod control resourceClaimName ctl)"
EXPECT=$NODE eventually 60 is node_of control || true
check "kube-scheduler places the control pod, made after the gate went" "$NODE" \
    "$(node_of control)"
check "but not the pod whose claim is being deleted" "" "$(node_of held)"
EXPECT=3 eventually 60 is used "$NS" devices gpus || true
check "the quota counts one GPU for each pod and nothing more" "3" \
    "$(used "$NS" devices gpus)"
check_match "deleting the pod" "deleted" "$(tk delete pod held --wait=true 2>&1)"
gone() { kubectl -n "$NS" get resourceclaim swap -o name 2>/dev/null; }
EXPECT="" eventually 60 is gone || true
check "lifts the pin, and the claim's deletion completes" "" "$(gone)"

# ---------------- the swap before the controller's check (controllers paused)
check_match "claim early with one H100" "created" "$(claim early 1)"
uid1=$(claim_uid early)
pause "$E2E"/controller-*.pid
out=$(claim_pod early resourceClaimName early)
check_match "a pod naming it is admitted, charged one GPU" "created" "$out"
check_match "the tenant deletes the claim before it is checked" "deleted" \
    "$(tk delete resourceclaim early 2>&1)"
check_match "and makes it again with 8 H100s" "created" "$(claim early 8)"
uid2=$(claim_uid early)
resume "$E2E"/controller-*.pid
EXPECT_MATCH="uid $uid2, charged uid $uid1" eventually 60 has pod_events early ClaimNotCharged || true
check_match "the controller refuses it, naming both claims" \
    "ResourceClaim early is not the claim gpuquota charged at admission \(uid $uid2, charged uid $uid1\)" \
    "$(pod_events early ClaimNotCharged)"
check "the pod stays behind gpuquota's gate" "gpuquota.io/claims" "$(gates early)"
check "and runs nowhere" "" "$(node_of early)"
check_match "the tenant may not lift gpuquota's gate" \
    "the scheduling gate gpuquota.io/claims is removed by gpuquota only" \
    "$(tk patch pod early --type=json -p '[{"op":"remove","path":"/spec/schedulingGates/0"}]' 2>&1)"
check "the new claim is not pinned" "" "$(finalizers early)"

# ------------------------------------------ refused at creation
check_match "a claim pod created on its node is refused" \
    "a pod created on a node \(spec.nodeName\) cannot wait behind the scheduling gate gpuquota.io/claims" \
    "$(tk create -f - 2>&1 <<EOF
apiVersion: v1
kind: Pod
metadata: {name: bound}
spec:
  nodeName: $NODE
  resourceClaims: [{name: gpu, resourceClaimName: ctl}]
  containers:
  - {name: main, image: registry.example/cuda:12, resources: {claims: [{name: gpu}]}}
EOF
)"
check_match "a pod naming one claim twice is refused" \
    'entries "a" and "b" name the same ResourceClaim "ctl"' \
    "$(tk create -f - 2>&1 <<EOF
apiVersion: v1
kind: Pod
metadata: {name: twice}
spec:
  resourceClaims: [{name: a, resourceClaimName: ctl}, {name: b, resourceClaimName: ctl}]
  containers:
  - {name: main, image: registry.example/cuda:12, resources: {claims: [{name: a}, {name: b}]}}
EOF
)"
check_match "a claim created with gpuquota's finalizer is refused" \
    "the finalizer gpuquota.io/charged-claim is added by gpuquota only" \
    "$(tk create -f - 2>&1 <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: stuck, finalizers: [gpuquota.io/charged-claim]}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]}}
EOF
)"

# ------------------------------------------ pricing a tenant cannot skew
kubectl -n "$NS" apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: choice}
spec: {spec: {devices: {requests: [{name: gpu, firstAvailable: [
  {name: seven, deviceClassName: gpu.nvidia.com, count: 7, selectors: [{cel: {expression: '$H100'}}]},
  {name: four, deviceClassName: gpu.nvidia.com, count: 4}]}]}}}
EOF
check_match "firstAvailable is charged the most devices of any alternative (7, not 4)" \
    "exceeded quota: devices, requested: gpus=7" \
    "$(claim_pod choice resourceClaimTemplateName choice 2>&1; true)"
device_class e2e-claims-any
kubectl -n "$NS" apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: masked}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: e2e-claims-any, count: 4,
  selectors: [{cel: {expression: '(device.driver == "nic.example.com") == false'}}]}}]}}}
EOF
check_match "a selector true for any driver does not make a class of unknown driver a NIC's" \
    "denied the request: .*gpuquota cannot tell which GPUs the pod's DRA claims hold" \
    "$(claim_pod masked resourceClaimTemplateName masked)"

# -- a claim named directly and adopted for a template entry of the same pod
# The template's claim carries a gpuquota.io/ label, so validate-claims
# refuses kube-controller-manager's create and it retries; meanwhile the
# tenant makes its directly named claim the pod's, for the template entry.
kubectl -n "$NS" apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: blocked}
spec:
  metadata: {labels: {gpuquota.io/block: "x"}}
  spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 1,
    selectors: [{cel: {expression: '$H100'}}]}}]}}
EOF
check_match "claim twin with one H100" "created" "$(claim twin 1)"
out=$(tk create -f - 2>&1 <<EOF
apiVersion: v1
kind: Pod
metadata: {name: adopt}
spec:
  resourceClaims: [{name: a, resourceClaimName: twin}, {name: b, resourceClaimTemplateName: blocked}]
  containers:
  - {name: main, image: registry.example/cuda:12, resources: {claims: [{name: a}, {name: b}]}}
EOF
)
check_match "a pod naming it and a template is admitted" "created" "$out"
adopt_uid=$(kubectl -n "$NS" get pod adopt -o jsonpath='{.metadata.uid}')
check_match "the tenant makes the claim the pod's, for the template entry" "patched" \
    "$(tk patch resourceclaim twin --type=merge -p "{\"metadata\":{\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"adopt\",\"uid\":\"$adopt_uid\",\"controller\":true}],\"annotations\":{\"resource.kubernetes.io/pod-claim-name\":\"b\"}}}" 2>&1)"
EXPECT_MATCH="use the same ResourceClaim twin" eventually 90 has pod_events adopt ClaimNotCharged || true
check_match "once adopted, the controller refuses the pod: one claim for two entries" \
    'entries "a" and "b" use the same ResourceClaim twin' "$(pod_events adopt ClaimNotCharged)"
check "the pod stays behind gpuquota's gate" "gpuquota.io/claims" "$(gates adopt)"

# ----- a template's claim that asks more than the template did at admission
# Replacing the template while kube-controller-manager is paused does not
# reliably change the claim it makes (its template cache may still hold the
# old one when it resumes), so the claim it adopts is the tenant's own: the
# template's claims are blocked (a gpuquota.io/ label makes validate-claims
# refuse kube-controller-manager's create), and the tenant makes the pod a
# claim of 8 H100s, owned by the pod and annotated for the template entry.
kubectl -n "$NS" apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: small}
spec:
  metadata: {labels: {gpuquota.io/block: "x"}}
  spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 1,
    selectors: [{cel: {expression: '$H100'}}]}}]}}
EOF
out=$(claim_pod tmpl resourceClaimTemplateName small)
check_match "a pod of a one-H100 template is admitted" "created" "$out"
tmpl_uid=$(kubectl -n "$NS" get pod tmpl -o jsonpath='{.metadata.uid}')
check_match "the tenant makes it a claim of 8 H100s for the template entry" "created" \
    "$(tk create -f - 2>&1 <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: tmpl-own
  annotations: {resource.kubernetes.io/pod-claim-name: gpu}
  ownerReferences: [{apiVersion: v1, kind: Pod, name: tmpl, uid: "$tmpl_uid", controller: true}]
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 8,
  selectors: [{cel: {expression: '$H100'}}]}}]}}
EOF
)"
EXPECT_MATCH="asks 8 GPUs" eventually 90 has pod_events tmpl ClaimNotCharged || true
check_match "the claim adopted for it is refused: it asks more than was charged" \
    "asks 8 GPUs \(640Gi, model h100-80gb\) but gpuquota charged 1 \(80Gi, model h100-80gb\)" \
    "$(pod_events tmpl ClaimNotCharged)"
check "the pod stays behind gpuquota's gate" "gpuquota.io/claims" "$(gates tmpl)"
EXPECT=6 eventually 30 is used "$NS" devices gpus || true
check "the quota counts what was charged: one for each pod, two for adopt" "6" "$(used "$NS" devices gpus)"

finish
