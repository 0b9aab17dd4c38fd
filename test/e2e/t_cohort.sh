#!/usr/bin/env bash
# Borrowing between GPUTenantQuotas of one cohort (spec.cohort) and fair
# sharing between borrowers (docs/queueing.md, "Borrowing and reclaim"), on
# the real control plane, each team an edit tenant of its own namespace:
#   1. tenants busy and idle name cohort e2e-pool (hard 16Gi each; busy
#      borrowingLimit 16Gi; idle reclaimWithinCohort Any). busy's Deployment
#      of five 8Gi pods: four start (two above its hard, marked
#      gpuquota.io/borrowing), the fifth would pass hard + borrowingLimit
#      and waits; busy's status.borrowed and idle's status.lent say 16Gi;
#   2. idle creates two 8Gi pods: exactly busy's two borrowing pods are
#      evicted, idle's pods start; busy's status.borrowed and idle's
#      status.lent are back to 0;
#   3. tenants w1 and w3 (hard 2Gi, borrowingLimit 16Gi, lendingLimit 0,
#      fairSharing.weight 1 and 3) and lender (hard 16Gi) name cohort
#      e2e-fair. While the
#      lender's 16Gi pod runs, w1 and w3 each queue sixteen 1Gi pods (two
#      start within their hard); the lender's pod is deleted: the 16Gi it
#      frees are shared by weighted dominant share, w1 borrowing 4Gi and w3
#      12Gi (asserted: together 16Gi, w1 3 to 5Gi, w3 11 to 13Gi);
#   4. sampled every 0.2 s throughout (one list of every namespace): no
#      tenant above hard + borrowingLimit, the lenders never above hard, no
#      cohort above the sum of its tenants' hard.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
NSB=e2e-coh-busy NSI=e2e-coh-idle NS1=e2e-coh-w1 NS3=e2e-coh-w3 NSL=e2e-coh-lender
SAMPLES=$E2E/coh-samples
cleanup() {
    [[ -n ${sampler:-} ]] && kill "$sampler" 2>/dev/null
    kubectl delete namespace "$NSB" "$NSI" "$NS1" "$NS3" "$NSL" --wait=false >/dev/null 2>&1
    kubectl delete gputenantquota e2e-coh-busy e2e-coh-idle e2e-coh-w1 e2e-coh-w3 e2e-coh-lender e2e-coh-bad \
        --ignore-not-found >/dev/null 2>&1
}
trap cleanup EXIT

for n in $NSB $NSI $NS1 $NS3 $NSL; do
    ns "$n" || { fail "namespace $n"; finish; }
    tenant_kubeconfig "$n" team "$E2E/$n.kubeconfig" || { fail "tenant kubeconfig $n"; finish; }
done
as() { local n=$1; shift; kubectl --kubeconfig "$E2E/$n.kubeconfig" -n "$n" "$@"; }
tenant() { # NAME NAMESPACE HARD COHORT [SPEC-FIELD...]
    local name=$1 n=$2 hard=$3 cohort=$4 f
    shift 4
    {
        printf 'apiVersion: gpuquota.io/v1alpha1\nkind: GPUTenantQuota\nmetadata: {name: %s}\n' "$name"
        printf 'spec:\n  namespaces: [%s]\n  hard: {gpu-memory: %s}\n  whenExceeded: Queue\n  cohort: %s\n' \
            "$n" "$hard" "$cohort"
        for f in "$@"; do printf '  %s\n' "$f"; done
    } | kubectl apply -f - >/dev/null
}
tenant e2e-coh-busy "$NSB" 16Gi e2e-pool 'borrowingLimit: {gpu-memory: 16Gi}'
check "a tenant with cohort and borrowingLimit is accepted" 0 $?
tenant e2e-coh-idle "$NSI" 16Gi e2e-pool 'preemption: {reclaimWithinCohort: Any}'
tenant e2e-coh-bad "$NSI" 16Gi Bad_Name 2>/dev/null
check "the CRD refuses a cohort that is not a DNS-1123 label" 1 $?
tenant e2e-coh-bad "$NSI" 16Gi ok 'fairSharing: {weight: "-1"}' 2>/dev/null
check "the CRD refuses a negative fairSharing.weight" 1 $?

bor_sample "$SAMPLES" "$NSB" "$NSI" "$NS1" "$NS3" "$NSL"

deploy() { # NS NAME REPLICAS MEMORY
    as "$1" create -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: $2}
spec:
  replicas: $3
  selector: {matchLabels: {app: $2}}
  template:
    metadata: {labels: {app: $2}}
    spec:
      terminationGracePeriodSeconds: 0
$(containers "gpuquota.io/gpu-memory: $4" '      ')
EOF
}
pod() {
    as "$1" create -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $2}
spec:
  terminationGracePeriodSeconds: 0
$(containers "gpuquota.io/gpu-memory: $3" '  ')
EOF
}

# ------------------------------------------------------------ 1. borrow across tenants
deploy "$NSB" train 5 8Gi
check "tenant busy creates a Deployment of five 8Gi pods" 0 $?
four() { [[ $(bor_count "$NSB" own) == 2 && $(bor_count "$NSB" true) == 2 && $(bor_count "$NSB" gated) == 1 ]]; }
eventually 60 four
check "busy runs 2 pods within its hard, 2 borrowed from idle; the 5th waits" "2 2 1" \
    "$(bor_count "$NSB" own) $(bor_count "$NSB" true) $(bor_count "$NSB" gated)"
as "$NSB" scale deployment train --replicas=4 >/dev/null
# status.borrowed / status.lent of a tenant of a cohort of tenants: its own
# place there (busy borrows 16Gi above its hard, idle lends them).
gtq_mem() { kubectl get gtq "$1" -o jsonpath="{.status.$2.gpu-memory}"; }
positions() { echo "$(gtq_mem e2e-coh-busy borrowed) $(gtq_mem e2e-coh-idle lent)"; }
at_positions() { [[ $(positions) == "$1" ]]; }
eventually 30 at_positions "16Gi 16Gi"
check "busy's status.borrowed and idle's status.lent say 16Gi" "16Gi 16Gi" "$(positions)"

# ------------------------------------------------------------ 2. reclaim across tenants
borrowers=$(bor_pods "$NSB" | grep '=true$' | cut -d= -f1 | sort | tr '\n' ' ')
pod "$NSI" i-1 8Gi && pod "$NSI" i-2 8Gi
check "tenant idle creates two 8Gi pods" 0 $?
eventually 60 bor_admitted "$NSI" i-1
eventually 30 bor_admitted "$NSI" i-2
check "idle's pods start" "," "$(bor_gates "$NSI" i-1),$(bor_gates "$NSI" i-2)"
check "exactly busy's two borrowing pods were evicted" "$borrowers" "$(bor_events "$NSB" Preempted | tr '\n' ' ')"
check "nobody of idle was evicted" "" "$(bor_events "$NSI" Preempted)"
eventually 30 at_positions "0 0"
check "after the reclaim busy borrows and idle lends nothing" "0 0" "$(positions)"
as "$NSB" delete deployment train >/dev/null

# ------------------------------------------------------------ 3. fair sharing 1:3
tenant e2e-coh-lender "$NSL" 16Gi e2e-fair
# w1 and w3 lend nothing (lendingLimit 0): the lender's 16Gi are all there is to share,
# and neither borrows the other's share before the other's pods exist.
tenant e2e-coh-w1 "$NS1" 2Gi e2e-fair 'borrowingLimit: {gpu-memory: 16Gi}' \
    'lendingLimit: {gpu-memory: 0}' 'fairSharing: {weight: 1}'
tenant e2e-coh-w3 "$NS3" 2Gi e2e-fair 'borrowingLimit: {gpu-memory: 16Gi}' \
    'lendingLimit: {gpu-memory: 0}' 'fairSharing: {weight: 3}'
pod "$NSL" blocker 16Gi
eventually 30 bor_admitted "$NSL" blocker
check "the lender's 16Gi pod starts" "" "$(bor_gates "$NSL" blocker)"
deploy "$NS1" w 16 1Gi
deploy "$NS3" w 16 1Gi
own2() { [[ $(bor_count "$NS1" own) == 2 && $(bor_count "$NS3" own) == 2 && $(bor_count "$NS1" gated) == 14 && $(bor_count "$NS3" gated) == 14 ]]; }
eventually 60 own2
check "w1 and w3 each run 2 pods within their hard, 14 wait" "2 14 2 14" \
    "$(bor_count "$NS1" own) $(bor_count "$NS1" gated) $(bor_count "$NS3" own) $(bor_count "$NS3" gated)"
as "$NSL" delete pod blocker --wait=false >/dev/null
shared() { [[ $(($(bor_count "$NS1" true) + $(bor_count "$NS3" true))) == 16 ]]; }
eventually 60 shared
sleep 3
b1=$(bor_count "$NS1" true) b3=$(bor_count "$NS3" true)
echo "# borrowed: w1 ${b1}Gi (weight 1), w3 ${b3}Gi (weight 3)"
check "the freed 16Gi are all borrowed" 16 "$((b1 + b3))"
check_match "w1 (weight 1) borrows about a quarter: 3 to 5Gi" "^[345]$" "$b1"
check_match "w3 (weight 3) borrows about three quarters: 11 to 13Gi" "^1[123]$" "$b3"

# ------------------------------------------------------------ 4. safety
bor_never "$SAMPLES" '$1 > 32 || $2 > 16 || $1 + $2 > 32 || $3 > 18 || $4 > 18 || $5 > 16 || $3 + $4 + $5 > 20' \
    "never a tenant above hard + borrowingLimit, a lender above hard, a cohort above its tenants' hard"
finish
