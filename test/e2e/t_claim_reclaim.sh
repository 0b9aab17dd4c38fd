#!/usr/bin/env bash
# Reclaim through a shared DRA ResourceClaim (docs/queueing.md, "Borrowing
# and reclaim"), each team an edit tenant of its own namespace under one
# GPUTenantQuota (gpus 2): borrower b (hard gpus 1, borrowingLimit 1) and
# lender l (hard gpus 1, reclaimWithinCohort Any). b runs a pod within its
# share on claim "own"; its claim "x" (one H100) is charged once however
# many pods name it, and borrowed:
#   1. p1 naming x is admitted above b's hard, marked gpuquota.io/borrowing;
#      p2 naming x adds nothing to the charge and is marked too (the claim's
#      record says its charge is borrowed); b may not remove the mark;
#      l's pod then reclaims: p1 and p2 are evicted together (evicting one
#      frees nothing while the other holds x), never b's pod within its
#      share, and l's pod starts;
#   2. the escape: p3 naming x borrows it again, p4 rides x, and b deletes
#      p3, the pod first charged for x. b still borrows x through p4; l's
#      next pod reclaims p4 and starts (before, p4 was unmarked: l's pod
#      waited for ever and b kept the borrowed GPU).
# (kwok publishes no ResourceSlices here: the claim pods stay Pending once
# admitted; what is tested is what gpuquota charges, marks and evicts.)
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
NSL=e2e-cr-l NSB=e2e-cr-b
cleanup() {
    kubectl delete namespace "$NSL" "$NSB" --wait=false >/dev/null 2>&1
    kubectl delete gputenantquota e2e-cr --ignore-not-found >/dev/null 2>&1
}
trap cleanup EXIT

for n in $NSL $NSB; do
    ns "$n" tenant=e2e-cr || { fail "namespace $n"; finish; }
    tenant_kubeconfig "$n" team "$E2E/$n.kubeconfig" || { fail "tenant kubeconfig $n"; finish; }
done
as() { local n=$1; shift; kubectl --kubeconfig "$E2E/$n.kubeconfig" -n "$n" "$@"; }
gpu_device_class
queue_tenant e2e-cr '{gpus: 2}'
quota "$NSB" team '{gpus: 1}' 'whenExceeded: Queue' 'borrowingLimit: {gpus: 1}'
quota "$NSL" team '{gpus: 1}' 'whenExceeded: Queue' 'preemption: {reclaimWithinCohort: Any}'

# h100 NS NAME: the tenant of NS makes a ResourceClaim of one H100.
h100() {
    as "$1" create -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $2}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 1,
  selectors: [{cel: {expression: 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA-H100-80GB-HBM3"'}}]}}]}}
EOF
}
# pod_on NAME CLAIM: pod NAME naming ResourceClaim CLAIM; on NS NAME CLAIM:
# the tenant of NS makes it.
pod_on() {
    printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  terminationGracePeriodSeconds: 0\n' "$1"
    printf '  resourceClaims: [{name: gpu, resourceClaimName: %s}]\n  containers:\n' "$2"
    printf '  - {name: main, image: registry.example/cuda:12, resources: {claims: [{name: gpu}]}}\n'
}
on() { pod_on "$2" "$3" | as "$1" create -f - >/dev/null; }
mark() { kubectl -n "$1" get pod "$2" -o jsonpath='{.metadata.annotations.gpuquota\.io/borrowing}' 2>/dev/null; }
gone() { [[ -z $(kubectl -n "$1" get pod "$2" -o name 2>/dev/null) ]]; }
borrowed() { kubectl -n "$NSB" get gq team -o jsonpath='{.status.borrowed.gpus}' 2>/dev/null; }
borrowed_is() { [[ $(borrowed) == "$1" ]]; }
# The webhooks read the quotas from their caches: wait until they gate.
gated() { pod_on probe own | as "$NSB" create --dry-run=server -o json -f - | jq -e '.spec.schedulingGates'; }

h100 "$NSB" own
h100 "$NSB" x
h100 "$NSL" lc
eventually 30 gated >/dev/null || fail "the webhooks do not gate pods in $NSB"

# ------------------------------------------------------------ 1. sharers go together
on "$NSB" b-own own
eventually 60 bor_admitted "$NSB" b-own
on "$NSB" p1 x
eventually 60 bor_admitted "$NSB" p1
on "$NSB" p2 x
eventually 60 bor_admitted "$NSB" p2
check "1: b's pod within its share unmarked, p1 and p2 on the borrowed claim marked" \
    "b-own=own p1=true p2=true" "$(bor_pods "$NSB" | tr '\n' ' ' | sed 's/ $//')"
out=$(as "$NSB" annotate pod p2 gpuquota.io/borrowing- 2>&1)
check_match "1: b may not remove p2's mark" "denied the request" "$out"
eventually 30 borrowed_is 1
check "1: b borrows one GPU (the claim, once)" "1" "$(borrowed)"
on "$NSL" l-1 lc
eventually 60 bor_admitted "$NSL" l-1
check "1: l's pod within its share starts after a reclaim" "" "$(bor_gates "$NSL" l-1)"
check "1: both pods naming the borrowed claim are evicted, b's own pod is not" "p1 p2" \
    "$(bor_events "$NSB" Preempted | tr '\n' ' ' | sed 's/ $//')"
eventually 30 borrowed_is 0
check "1: b borrows nothing" "0" "$(borrowed)"
as "$NSL" delete pod l-1 --wait=false >/dev/null
eventually 60 gone "$NSL" l-1
kubectl -n "$NSB" delete events --all >/dev/null 2>&1

# ------------------------------------------------------------ 2. the escape
on "$NSB" p3 x
eventually 60 bor_admitted "$NSB" p3
on "$NSB" p4 x
eventually 60 bor_admitted "$NSB" p4
check "2: p3 borrows x again, p4 rides it marked" "b-own=own p3=true p4=true" \
    "$(bor_pods "$NSB" | tr '\n' ' ' | sed 's/ $//')"
as "$NSB" delete pod p3 --wait=false >/dev/null
eventually 60 gone "$NSB" p3
eventually 30 borrowed_is 1
check "2: with the marked pod deleted, b still borrows the claim through p4" "1 true" \
    "$(borrowed) $(mark "$NSB" p4)"
on "$NSL" l-2 lc
eventually 60 bor_admitted "$NSL" l-2
check "2: l's next pod starts: the lender gets its GPU back" "" "$(bor_gates "$NSL" l-2)"
check "2: p4 is reclaimed, b's own pod is not" "p4" \
    "$(bor_events "$NSB" Preempted | tr '\n' ' ' | sed 's/ $//')"
eventually 30 borrowed_is 0
check "2: b borrows nothing" "0" "$(borrowed)"
finish
