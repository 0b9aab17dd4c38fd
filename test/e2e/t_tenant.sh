#!/usr/bin/env bash
# What a tenant with the edit role in its own namespace can change on a pod
# after admission does not change what the pod counts (docs/design.md, "The
# charge is fixed at admission"). Every step runs as a ServiceAccount bound
# to edit in its namespace, through kubectl with that account's token, and
# each was a way around the quota before the admission record:
#   1. a KAI request annotation written on a running pod (malformed, or two
#      at once) made the recount drop the pod;
#   2. metadata.managedFields claiming gpuquota's records made the recount
#      disown them (the devices of a DRA claim);
#   3. spec.activeDeadlineSeconds added took the pod out of a NotTerminating
#      quota;
#   5. devices of a DeviceClass outside deviceClasses (MIG devices of
#      NVIDIA's driver) were free;
#   6. a request annotation on a CPU-only pod made the recount charge it, so
#      one tenant could fill a tenant quota it shares with others;
#   7. a create of an existing pod name was charged until its reservation
#      expired, though kube-apiserver refused it (AlreadyExists);
#   8. CPU-only pods labelled into a pod group were read with its members
#      by every queued member's admission (the webhook's memory);
#  10. (an honest user refused) a pod whose only claim is a NIC was refused
#      where a quota governs.
# Each change is followed by a barrier: a 1Gi pod created after it. Pod
# events reach the controller in the order the API server wrote them, so a
# status that counts the barrier was computed after the change; it must
# still count the pod changed (before: it had dropped it).
# Also: the records are gpuquota's own (a forged one is refused or replaced
# at creation, and no tenant may change one afterwards).
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

NS=e2e-tenant
NSB=e2e-tenant-b
TQ=e2e-tenant-shared
cleanup() {
    kubectl delete namespace "$NS" "$NSB" --ignore-not-found --wait=true --timeout=120s >/dev/null
    kubectl delete gputenantquota "$TQ" --ignore-not-found >/dev/null 2>&1
    kubectl delete deviceclass gpu.nvidia.com mig.nvidia.com nic.e2e.example any.e2e.example \
        --ignore-not-found >/dev/null 2>&1
    rm -f "$TKC"
}
TKC=$(mktemp)
trap cleanup EXIT

ns "$NS" tenant-group=e2e-shared || { fail "namespace $NS"; finish; }
ns "$NSB" tenant-group=e2e-shared || { fail "namespace $NSB"; finish; }
tenant_kubeconfig "$NS" tenant "$TKC" || { fail "tenant kubeconfig"; finish; }
tk() { kubectl --kubeconfig "$TKC" -n "$NS" "$@"; }

check "the tenant may edit pods" "yes" "$(tk auth can-i patch pods 2>&1)"
# gpuquota's objects are the admin's: an aggregate-to-edit label added to its
# roles by mistake would let every tenant raise its own quota.
for verb_res in "create gpuquotas.gpuquota.io" "patch gpuquotas.gpuquota.io" \
    "update gpuquotas.gpuquota.io/status" "patch gpuquotas.gpuquota.io/status" \
    "create gpulimitranges.gpuquota.io" "delete gpulimitranges.gpuquota.io" \
    "create gputenantquotas.gpuquota.io" "patch gputenantquotas.gpuquota.io/status" \
    "patch configmaps/gpuquota-config -n gpuquota-system" "create deviceclasses.resource.k8s.io"; do
    # shellcheck disable=SC2086 # verb, resource and flags, split on purpose
    check "the tenant may not $verb_res" "no" "$(tk auth can-i $verb_res 2>/dev/null)"
done
check "the tenant is no admin" "no" "$(tk auth can-i patch pods -n "$NSB" 2>&1)"

quota "$NS" mem '{gpu-memory: 30Gi}'
quota "$NS" nt '{gpu-memory: 30Gi}' 'scopes: [NotTerminating]'
quota "$NS" devices '{gpus: 1}'
kubectl apply -f - >/dev/null <<EOF
apiVersion: gpuquota.io/v1alpha1
kind: GPUTenantQuota
metadata: {name: $TQ}
spec:
  namespaceSelector: {matchLabels: {tenant-group: e2e-shared}}
  hard: {gpu-memory: 32Gi}
EOF
gpu_device_class
kubectl -n "$NS" apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 1,
  selectors: [{cel: {expression: 'device.attributes["gpu.nvidia.com"].productName == "Tesla-T4"'}}]}}]}}}
EOF
# claim_pod NAME: a pod whose one container uses a claim of template one-gpu.
claim_pod() {
    printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n' "$1"
    printf '  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]\n'
    printf '  containers:\n  - {name: main, image: registry.example/cuda:12, resources: {claims: [{name: gpu}]}}\n'
}
tused() { kubectl get gputenantquota "$TQ" -o "jsonpath={.status.used.gpu-memory}" 2>/dev/null; }
is() { [[ $("$@" 2>/dev/null) == "$EXPECT" ]]; }

check_match "the tenant creates a 10Gi pod" "created" "$(tk create -f - 2>&1 <<<"$(gpu_pod p1 10Gi)")"
EXPECT=10Gi eventually 30 is used "$NS" mem gpu-memory || fail "mem counts p1: $(used "$NS" mem gpu-memory)"
EXPECT=10Gi eventually 30 is used "$NS" nt gpu-memory || fail "nt counts p1: $(used "$NS" nt gpu-memory)"
check_match "its admission record is on it" \
    '"charge":\{"gpu-memory":"10Gi","gpu-pods":"1","gpus":"0"\},"scope":"NotTerminating"' \
    "$(tk get pod p1 -o jsonpath='{.metadata.annotations.gpuquota\.io/admission}')"

# barrier N [Q]: the tenant creates 1Gi pod bN after the change under test
# and waits until the controller has counted it: GPUQuota Q (default mem)
# holds no reservation any more (the webhook's for bN is folded once the
# controller's cache has bN, and so every event before it). Prints Q's
# gpu-memory used then; deletes bN and waits until mem is back where it was.
barrier() {
    local q=${2:-mem} before
    before=$(used "$NS" mem gpu-memory)
    tk create -f - >/dev/null 2>&1 <<<"$(gpu_pod "b$1" 1Gi)" || { echo "barrier b$1 refused"; return; }
    EXPECT=0 eventually 30 is reservations "$NS" "$q" || { echo "b$1 never folded"; return; }
    used "$NS" "$q" gpu-memory
    tk delete pod "b$1" --wait=false >/dev/null 2>&1
    EXPECT=$before eventually 30 is used "$NS" mem gpu-memory || true
}

# ------------------------------------------------ 1. request annotations
check_match "the tenant may write a KAI annotation (not a gpuquota key)" "annotated" \
    "$(tk annotate pod p1 gpu-fraction=garbage 2>&1)"
check "a malformed KAI annotation leaves p1 counted" "11Gi" "$(barrier 1)"
tk annotate pod p1 --overwrite gpu-fraction=0.5 gpu-memory=100 >/dev/null 2>&1
check "two KAI annotations leave p1 counted" "11Gi" "$(barrier 2)"
check_match "and a 24Gi pod is still over the 30Gi quota" 'exceeded quota: mem' \
    "$(tk create -f - 2>&1 <<<"$(gpu_pod p2 24Gi)")"

# ------------------------------------------ 7. creating an existing name
EXPECT=0 eventually 30 is reservations "$NS" mem || fail "reservations folded: $(reservations "$NS" mem)"
for i in 1 2 3 4 5 6 7; do
    out=$(tk create -f - 2>&1 <<<"$(gpu_pod p1 10Gi)")
done
check_match "creating p1 again is refused as AlreadyExists" \
    'Error from server \(AlreadyExists\).*pods "p1" already exists' "$out"
check "7 such creates hold no reservation" "0" "$(reservations "$NS" mem)"

# ----------------------------------------------- 3. activeDeadlineSeconds
check_match "the tenant may add activeDeadlineSeconds to a running pod" "patched" \
    "$(tk patch pod p1 -p '{"spec":{"activeDeadlineSeconds":315360000}}' 2>&1)"
check "p1 stays in the NotTerminating quota it was admitted in" "11Gi" "$(barrier 3 nt)"
check_match "and a 24Gi pod is still over it" 'exceeded quota: (mem|nt)' \
    "$(tk create -f - 2>&1 <<<"$(gpu_pod p3 24Gi)")"

# ------------------------------------------------- 2. forged managedFields
check_match "the tenant creates a pod with one GPU through a DRA claim" "created" \
    "$(tk create -f - 2>&1 <<<"$(claim_pod d1)")"
EXPECT=1 eventually 30 is used "$NS" devices gpus || fail "devices counts d1: $(used "$NS" devices gpus)"
mf='[{"op":"add","path":"/metadata/managedFields/-","value":{"manager":"tenant","operation":"Update",'
mf+='"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{'
mf+='"f:gpuquota.io/managed":{}},"f:annotations":{"f:gpuquota.io/gpu-claims":{},'
mf+='"f:gpuquota.io/admission":{}}}}}}]'
check_match "the tenant may rewrite managedFields" "patched" "$(tk patch pod d1 --type=json -p "$mf" 2>&1)"
check_match "the forged entry is stored" '"manager":"tenant"' \
    "$(tk get pod d1 -o jsonpath='{.metadata.managedFields}')"
barrier 4 >/dev/null
check "the DRA pod is still charged its GPU" "1" "$(used "$NS" devices gpus)"
check_match "and a second one-GPU claim pod is over the quota" 'exceeded quota: (devices|mem)' \
    "$(tk create -f - 2>&1 <<<"$(claim_pod d2)")"
tk delete pod d1 --wait=false >/dev/null 2>&1
EXPECT=0 eventually 30 is used "$NS" devices gpus || fail "d1 gone: $(used "$NS" devices gpus)"

# ------------------------------------------ 6. a CPU-only pod made costly
check_match "the tenant runs a CPU-only pod" "created" \
    "$(tk create -f - 2>&1 <<<"$(pod_yaml c1 'cpu: 100m')")"
check_match "and annotates it with a 1Ti KAI request" "annotated" \
    "$(tk annotate pod c1 gpu-memory=1048576 2>&1)"
check "the namespace counts no GPU for it" "11Gi" "$(barrier 5)"
EXPECT=10Gi eventually 30 is tused || fail "tenant quota: $(tused)"
check "the shared tenant quota counts p1 alone" "10Gi" "$(tused)"
check_match "another team's 8Gi pod under the shared tenant quota is admitted" "created" \
    "$(kubectl -n "$NSB" create -f - 2>&1 <<<"$(gpu_pod other 8Gi)")"

# ------------------------- managedFields nested deep stop no list or watch
# kube-apiserver keeps a managedFields entry nested 200 deep; the
# controller's lists and watches of every pod in the cluster used to fail
# on it (deeper than the parser's 64 levels), so no quota was counted any
# more. managedFields are now left out of lists and watches, at any depth.
deep=$(python3 -c 'import json
d = {}; c = d
for i in range(200):
    n = {}; c["f:a%d" % i] = n; c = n
print(json.dumps([{"op": "add", "path": "/metadata/managedFields/-", "value": {"manager": "deep",
    "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
    "fieldsV1": {"f:metadata": {"f:labels": d}}}}]))')
check_match "the tenant may nest a pod's managedFields 200 deep" "patched" \
    "$(tk patch pod c1 --type=json -p "$deep" 2>&1)"
check "the controller still counts every pod (a barrier is folded)" "11Gi" "$(barrier 6)"

# ----------------------------- 5. and 10. DeviceClasses outside deviceClasses
# An administrator's classes (a tenant may create none): MIG devices of
# NVIDIA's GPU driver, a NIC, and a class that pins no driver.
device_class mig.nvidia.com \
    'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "mig"'
device_class nic.e2e.example 'device.driver == "nic.e2e.example"'
device_class any.e2e.example
for c in mig.nvidia.com:4 nic.e2e.example:1 any.e2e.example:1; do
    kubectl -n "$NS" apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: ${c%%.*}}
spec: {spec: {devices: {requests: [{name: d, exactly: {deviceClassName: ${c%%:*}, count: ${c##*:}}}]}}}
EOF
done
# dev_pod NAME TEMPLATE LIMITS: a pod using a claim of TEMPLATE, its container limited to LIMITS.
dev_pod() {
    printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n' "$1"
    printf '  resourceClaims: [{name: d, resourceClaimTemplateName: %s}]\n' "$2"
    printf '  containers:\n  - {name: main, image: registry.example/cuda:12, resources: {claims: [{name: d}], limits: {%s}}}\n' "$3"
}
check_match "4 MIG devices beside a GPU slice are charged as GPUs, over 'gpus: 1'" \
    'exceeded quota: (devices, requested: gpus=4|(mem|nt), requested: gpu-memory=565Gi),' \
    "$(tk create -f - 2>&1 <<<"$(dev_pod m1 mig 'gpuquota.io/gpu-memory: 1Gi')")"
check_match "a pod whose only claim is a NIC is admitted where quotas govern" "created" \
    "$(tk create -f - 2>&1 <<<"$(dev_pod n1 nic 'cpu: 100m')")"
check_match "and counts no GPU" '^0?$' "$(used "$NS" devices gpus)"
check_match "a class whose driver gpuquota cannot tell is refused where a quota governs" \
    'gpuquota cannot tell which GPUs the pod.s DRA claims hold' \
    "$(tk create -f - 2>&1 <<<"$(dev_pod a1 any 'cpu: 100m')")"

# ------------------------------------ 8. pod-group members read, bounded
# A tenant labels many CPU-only pods into a group with large annotations;
# a queued GPU member's admission lists its group's members. Members are
# GPU pods (labelled managed by gpuquota), so those pods are never read,
# and a CPU-only pod cannot wear the managed label to be read with them.
NSQ=e2e-tenant-q
QKC=$(mktemp)
ns "$NSQ" || fail "namespace $NSQ"
tenant_kubeconfig "$NSQ" tenant "$QKC" || fail "tenant kubeconfig $NSQ"
qk() { kubectl --kubeconfig "$QKC" -n "$NSQ" "$@"; }
quota "$NSQ" team '{gpu-memory: 32Gi}' 'whenExceeded: Queue'
big=$(head -c 90000 /dev/zero | tr '\0' 'x')
for i in $(seq 1 40); do
    printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: cpu-%s\n  labels: {gpuquota.io/pod-group: big}\n  annotations: {pad: "%s"}\nspec:\n  containers: [{name: c, image: registry.example/app:1}]\n' "$i" "$big"
    echo ---
done >"$QKC.cpu"
check "the tenant creates 40 CPU-only pods labelled into group big (3.6 MB)" "40" \
    "$(qk create -f "$QKC.cpu" 2>&1 | grep -c created)"
check_match "a CPU-only pod wearing gpuquota's managed label is refused" \
    'label gpuquota.io/managed is written by gpuquota only' \
    "$(qk create -f - 2>&1 <<<"$(pod_yaml cpu-m 'cpu: 100m' '  labels: {gpuquota.io/managed: "true", gpuquota.io/pod-group: big}')")"
member() { gpu_pod "$1" 8Gi '  labels: {gpuquota.io/pod-group: big}
  annotations: {gpuquota.io/pod-group-size: "3"}'; }
qk create -f - >/dev/null 2>&1 <<<"$(gpu_pod filler 16Gi)"
for i in 0 1 2; do
    check_match "queued member $i of group big is admitted" "created" "$(qk create -f - 2>&1 <<<"$(member m-$i)")"
done
q_is3() { [[ $(kubectl -n "$NSQ" get gq team -o jsonpath='{.status.queuedPods}') == 3 ]]; }
eventually 30 q_is3 || fail "3 members queued: $(kubectl -n "$NSQ" get gq team -o jsonpath='{.status.queuedPods}')"
kubectl delete namespace "$NSQ" --wait=false >/dev/null 2>&1
rm -f "$QKC" "$QKC.cpu"

# --------------------------- 11. a queue of the tenant's own, and Deny quotas
# The gate gpuquota.io/quota written by a tenant on a pod no Queue quota
# governs would hold it in the controller's memory, uncharged and uncapped:
# refused. And a pod that a Queue quota queues still needs room now in every
# Deny quota governing it, read fresh (the caches hold specs, so a full Deny
# quota looked empty and such pods queued without bound).
NSG=e2e-tenant-gate NSM=e2e-tenant-mixed TQM=e2e-tenant-mixed-cap
GKC=$(mktemp) MKC=$(mktemp)
ns "$NSG" || fail "namespace $NSG"
ns "$NSM" || fail "namespace $NSM"
tenant_kubeconfig "$NSG" tenant "$GKC" || fail "tenant kubeconfig $NSG"
tenant_kubeconfig "$NSM" tenant "$MKC" || fail "tenant kubeconfig $NSM"
gk() { kubectl --kubeconfig "$GKC" -n "$NSG" "$@"; }
mk() { kubectl --kubeconfig "$MKC" -n "$NSM" "$@"; }
quota "$NSG" team '{gpu-memory: 8Gi}'
quota "$NSM" team '{gpu-memory: 100Gi}' 'whenExceeded: Queue'
printf 'apiVersion: gpuquota.io/v1alpha1\nkind: GPUTenantQuota\nmetadata: {name: %s}\nspec: {namespaces: [%s], hard: {gpu-memory: 8Gi}}\n' \
    "$TQM" "$NSM" | kubectl apply -f - >/dev/null
self_gated() { gpu_pod "$1" "$2" | sed 's|^spec:$|spec:\n  schedulingGates: [{name: gpuquota.io/quota}]|'; }
g_seen() { ! gk create --dry-run=server -f - >/dev/null 2>&1 <<<"$(gpu_pod probe 9Gi)"; }
eventually 30 g_seen || fail "the webhooks never saw $NSG/team"
check_match "a pod gated by the tenant where only a Deny quota governs is refused" \
    'the scheduling gate gpuquota.io/quota queues a pod only where a quota with whenExceeded: Queue governs it' \
    "$(gk create -f - 2>&1 <<<"$(self_gated own 1Gi)")"
check_match "the same pod without the gate is decided as ever" "created" \
    "$(gk create -f - 2>&1 <<<"$(gpu_pod plain 1Gi)")"
check_match "a pod filling the Deny tenant quota is created under $NSM's Queue quota" "created" \
    "$(mk create -f - 2>&1 <<<"$(gpu_pod fill 8Gi)")"
t_full() { [[ $(kubectl get gtq "$TQM" -o jsonpath='{.status.used.gpu-memory}') == 8Gi ]]; }
eventually 30 t_full || fail "fill ungated and counted in $TQM: $(kubectl get gtq "$TQM" -o jsonpath='{.status.used}')"
check_match "then a 1Gi pod is refused by the full Deny tenant quota, not queued" \
    "exceeded tenant quota: $TQM" "$(mk create -f - 2>&1 <<<"$(gpu_pod more 1Gi)")"
check "nothing of it waits" "" "$(mk get pod more -o name 2>/dev/null)"
kubectl delete namespace "$NSG" "$NSM" --wait=false >/dev/null 2>&1
kubectl delete gtq "$TQM" --ignore-not-found >/dev/null 2>&1
rm -f "$GKC" "$MKC"

# ---------------------------------------------------- the records are ours
check_match "a tenant cannot rewrite the admission record" \
    'denied the request: changing gpuquota.io/ labels and annotations is reserved to gpuquota' \
    "$(tk annotate pod p1 --overwrite 'gpuquota.io/admission={}' 2>&1)"
check_match "nor remove it" \
    'denied the request: changing gpuquota.io/ labels and annotations is reserved to gpuquota' \
    "$(tk annotate pod p1 gpuquota.io/admission- 2>&1)"
forged='{"charge":{"gpu-memory":"1Gi","gpu-pods":"1","gpus":"0"},"scope":"NotTerminating"}'
check_match "a CPU-only pod carrying an admission record is refused" \
    'this pod asks for no GPU: remove them' \
    "$(tk create -f - 2>&1 <<<"$(pod_yaml c2 'cpu: 100m' "  annotations: {gpuquota.io/admission: '$forged'}")")"
check_match "a CPU-only pod carrying a charged line is refused" \
    'this pod asks for no GPU: remove them' \
    "$(tk create -f - 2>&1 <<<"$(pod_yaml c3 'cpu: 100m' "  annotations: {gpuquota.io/charged: 'gpu-memory=1Ti,gpus=0,gpu-pods=1'}")")"
tk delete pod p1 --wait=false >/dev/null 2>&1
EXPECT=0 eventually 30 is used "$NS" mem gpu-memory || fail "p1 gone: $(used "$NS" mem gpu-memory)"
check_match "a GPU pod carrying a forged 1Gi record is admitted" "created" \
    "$(tk create -f - 2>&1 <<<"$(gpu_pod p4 10Gi "  annotations: {gpuquota.io/admission: '$forged'}")")"
check_match "with the record gpuquota wrote in its place" '"gpu-memory":"10Gi"' \
    "$(tk get pod p4 -o jsonpath='{.metadata.annotations.gpuquota\.io/admission}')"
EXPECT=10Gi eventually 30 is used "$NS" mem gpu-memory || fail "p4 counts 10Gi: $(used "$NS" mem gpu-memory)"
check "and charged 10Gi" "10Gi" "$(used "$NS" mem gpu-memory)"

finish
