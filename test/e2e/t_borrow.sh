#!/usr/bin/env bash
# Borrowing and reclaim between the GPUQuotas of one GPUTenantQuota
# (docs/queueing.md, "Borrowing") on the real control plane, each team an
# edit tenant of its own namespace:
#   1. team A's quota (hard 16Gi, borrowingLimit 16Gi) borrows team B's
#      idle 16Gi: all four 8Gi pods of its Deployment start, the two above
#      its hard marked gpuquota.io/borrowing, status.borrowed 16Gi;
#   2. a fifth would pass the borrowing limit: it waits;
#   3. team B (reclaimWithinCohort: Any) creates two pods: exactly the two
#      borrowing pods of A are evicted (never one within A's share), B's pods
#      start; the pods A's ReplicaSet makes again wait, reclaiming nothing;
#   1b. who lends it: B's status.lent 16Gi and the tenant's borrowed and
#      lent 16Gi, the Borrowed/Lent columns of `kubectl get gq -o wide` (as
#      the teams read them), `kubectl gpuquota top` (table and JSON), and the
#      leader's gauges gpuquota_quota_borrowed and gpuquota_quota_lent;
#   3b. after the reclaim B lends nothing, and the preemptions are counted
#      as Reclaim, their two victims on A's quota;
#   4. sampled throughout (one list of both namespaces, then 0.2 s, and
#      again): A never above hard + borrowingLimit, B never above hard, the
#      tenant never above its hard.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
NSA=e2e-bor-a NSB=e2e-bor-b
KA=$E2E/bor-a.kubeconfig KB=$E2E/bor-b.kubeconfig
SAMPLES=$E2E/bor-samples
cleanup() {
    [[ -n ${sampler:-} ]] && kill "$sampler" 2>/dev/null
    kubectl delete namespace "$NSA" "$NSB" --wait=false >/dev/null 2>&1
    kubectl delete gputenantquota e2e-bor --ignore-not-found >/dev/null 2>&1
}
trap cleanup EXIT

ns "$NSA" tenant=e2e-bor || { fail "namespace $NSA"; finish; }
ns "$NSB" tenant=e2e-bor || { fail "namespace $NSB"; finish; }
tenant_kubeconfig "$NSA" team "$KA" || { fail "tenant kubeconfig A"; finish; }
tenant_kubeconfig "$NSB" team "$KB" || { fail "tenant kubeconfig B"; finish; }
ta() { kubectl --kubeconfig "$KA" -n "$NSA" "$@"; }
tb() { kubectl --kubeconfig "$KB" -n "$NSB" "$@"; }
queue_tenant e2e-bor '{gpu-memory: 32Gi}'
quota "$NSA" team '{gpu-memory: 16Gi}' 'whenExceeded: Queue' 'borrowingLimit: {gpu-memory: 16Gi}'
quota "$NSB" team '{gpu-memory: 16Gi}' 'whenExceeded: Queue' 'preemption: {reclaimWithinCohort: Any}'

bor_sample "$SAMPLES" "$NSA" "$NSB"

pod() {
    cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  terminationGracePeriodSeconds: 0
$(containers 'gpuquota.io/gpu-memory: 8Gi' '  ')
EOF
}

# kubectl gpuquota as a user installs it: the kubectl-gpuquota symlink on PATH.
mkdir -p "$E2E/bin" && ln -sf "$GQ" "$E2E/bin/kubectl-gpuquota" && PATH=$E2E/bin:$PATH

# ------------------------------------------------------------ 1. borrow
ta create -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: train}
spec:
  replicas: 4
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec:
      terminationGracePeriodSeconds: 0
$(containers 'gpuquota.io/gpu-memory: 8Gi' '      ')
EOF
check "team A creates a Deployment of four 8Gi pods" 0 $?
four() { [[ $(bor_count "$NSA" own) == 2 && $(bor_count "$NSA" true) == 2 ]]; }
eventually 60 four
check "A runs 2 pods within its share and 2 on borrowed room" "2 2" "$(bor_count "$NSA" own) $(bor_count "$NSA" true)"
borrowed_is() { [[ $(kubectl -n "$NSA" get gq team -o jsonpath='{.status.borrowed.gpu-memory}') == "$1" ]]; }
eventually 30 borrowed_is 16Gi
check "A's status says it borrows 16Gi" 16Gi "$(kubectl -n "$NSA" get gq team -o jsonpath='{.status.borrowed.gpu-memory}')"

# ------------------------------------------- 1b. who lends it, as shown
lent_is() { [[ $(tb get gq team -o jsonpath='{.status.lent.gpu-memory}') == "$1" ]]; }
eventually 30 lent_is 16Gi
check "B's status says it lends 16Gi (team B reads it)" 16Gi "$(tb get gq team -o jsonpath='{.status.lent.gpu-memory}')"
check "A, above its share, lends nothing" 0 "$(ta get gq team -o jsonpath='{.status.lent.gpu-memory}')"
check "B cannot borrow: no status.borrowed" "" "$(tb get gq team -o jsonpath='{.status.borrowed}')"
sums() { kubectl get gtq e2e-bor -o jsonpath='{.status.borrowed.gpu-memory} {.status.lent.gpu-memory}'; }
sums_are() { [[ $(sums) == "$1" ]]; }
eventually 30 sums_are "16Gi 16Gi"
check "the tenant sums its quotas: borrowed 16Gi, lent 16Gi" "16Gi 16Gi" "$(sums)"
# column TABLE NAME: the values under column NAME of a kubectl table, read
# where the header puts it (an empty cell is blank: fields do not line up).
column() {
    awk -v c="$2" 'NR == 1 {k = index($0 " ", " " c " ") + 1; next}
        k > 1 {s = substr($0, k); sub(/ .*/, "", s); print s}' <<<"$1"
}
wide=$(ta get gq team -o wide)
check "kubectl get gq -o wide: A's BORROWED column" 16Gi "$(column "$wide" BORROWED)"
check "kubectl get gq -o wide: A's LENT column" 0 "$(column "$wide" LENT)"
wide=$(tb get gq team -o wide)
check "kubectl get gq -o wide: B's LENT column" 16Gi "$(column "$wide" LENT)"
check "B's BORROWED column is empty" "" "$(column "$wide" BORROWED)"
wide=$(kubectl get gtq e2e-bor -o wide)
check "kubectl get gtq -o wide: the tenant's BORROWED and LENT" "16Gi 16Gi" \
    "$(column "$wide" BORROWED) $(column "$wide" LENT)"
check "the default table leaves them to -o wide" "" "$(ta get gq team | head -1 | grep -o -e BORROWED -e LENT)"
top=$(kubectl gpuquota top --kubeconfig "$KB" -n "$NSB" 2>/dev/null)
check_match "kubectl gpuquota top as team B: BORROWED and LENT columns" 'HARD +BORROWED +LENT +USAGE' "$top"
check_match "top: B's nominal 16Gi, nothing borrowed, 16Gi lent" \
    'namespace +e2e-bor-b/team +gpu-memory +0 +[^ ]+ +[^ ]+ +16Gi +- +16Gi ' "$top"
top=$(kubectl gpuquota top --kubeconfig "$KA" -n "$NSA" 2>/dev/null)
check_match "top as team A: 32Gi used of its nominal 16Gi, 16Gi borrowed, 0 lent" \
    'namespace +e2e-bor-a/team +gpu-memory +32Gi +[^ ]+ +[^ ]+ +16Gi +16Gi +0 ' "$top"
json=$(kubectl gpuquota top -A -o json)
check "top -o json: A borrowed, B lent, the tenant both" "16Gi 16Gi 16Gi 16Gi" "$(jq -r --arg a "$NSA" --arg b "$NSB" '
    [(.quotas[] | select(.namespace == $a) | .resources[0].borrowed),
     (.quotas[] | select(.namespace == $b) | .resources[0].lent),
     (.quotas[] | select(.name == "e2e-bor") | .resources[0].borrowed, .resources[0].lent)] | join(" ")' <<<"$json")"
gauge() { leader_metric "gpuquota_quota_$1{namespace=\"$2\",quota=\"$3\",resource=\"gpu-memory\"}"; }
gauges_are() { [[ "$(gauge borrowed "$NSA" team) $(gauge lent "$NSB" team) $(gauge lent "" e2e-bor)" == "$1" ]]; }
eventually 30 gauges_are "17179869184 17179869184 17179869184"
check "gauges: A borrows, B lends, the tenant lends 16Gi" "17179869184 17179869184 17179869184" \
    "$(gauge borrowed "$NSA" team) $(gauge lent "$NSB" team) $(gauge lent "" e2e-bor)"
reclaims_before=$(leader_metric 'gpuquota_preemptions_total{reason="Reclaim"}')

# ------------------------------------------------------------ 2. the limit
ta scale deployment train --replicas=5 >/dev/null
sleep 5
check "a fifth pod would pass borrowingLimit: it waits" "1" "$(bor_count "$NSA" gated)"
ta scale deployment train --replicas=4 >/dev/null

# ------------------------------------------------------------ 3. reclaim
borrowers=$(bor_pods "$NSA" | grep '=true$' | cut -d= -f1 | sort | tr '\n' ' ')
own=$(bor_pods "$NSA" | grep '=own$' | cut -d= -f1 | sort | tr '\n' ' ')
pod b-1 | tb create -f - >/dev/null
pod b-2 | tb create -f - >/dev/null
check "team B creates two pods" 0 $?
eventually 60 bor_admitted "$NSB" b-1
eventually 30 bor_admitted "$NSB" b-2
check "B's pods start" "," "$(bor_gates "$NSB" b-1),$(bor_gates "$NSB" b-2)"
check "exactly A's two borrowing pods were evicted" "$borrowers" "$(bor_events "$NSA" Preempted | tr '\n' ' ')"
check "their Events say they were reclaimed (reclaimWithinCohort)" "2" \
    "$(kubectl -n "$NSA" get events -o json | jq '[.items[] | select(.reason == "Preempted" and (.message | endswith("(preemption.reclaimWithinCohort)")))] | length')"
for p in $own; do
    check "$p, within A's share, still runs" "$p=own" "$(bor_pods "$NSA" | grep "^$p=")"
done
remade() { [[ $(bor_count "$NSA" gated) == 2 ]]; }
eventually 60 remade
sleep 5
check "A's remade pods wait: A is at its share and B uses its own" "2 2" "$(bor_count "$NSA" own) $(bor_count "$NSA" gated)"
check "and reclaim nothing back" "$borrowers" "$(bor_events "$NSA" Preempted | tr '\n' ' ')"
check "nobody of B was evicted" "" "$(bor_events "$NSB" Preempted)"
eventually 30 borrowed_is 0
check "after the reclaim A borrows nothing" 0 "$(kubectl -n "$NSA" get gq team -o jsonpath='{.status.borrowed.gpu-memory}')"
eventually 30 lent_is 0
check "and B lends nothing" 0 "$(tb get gq team -o jsonpath='{.status.lent.gpu-memory}')"
eventually 30 sums_are "0 0"
check "nor the tenant" "0 0" "$(sums)"
preemptors=$(bor_events "$NSB" Preempting | wc -l)
check "B's pods reclaimed (one preemption each at most)" 1 "$((preemptors >= 1 && preemptors <= 2))"
check "each preemption counted as Reclaim" "$((${reclaims_before:-0} + preemptors))" \
    "$(leader_metric 'gpuquota_preemptions_total{reason="Reclaim"}')"
check "its two victims on A's quota, as Reclaim" 2 \
    "$(leader_metric "gpuquota_preemption_victims_total{namespace=\"$NSA\",quota=\"team\",reason=\"Reclaim\"}")"
check "none inside a quota" 0 \
    "$(leader_metric "gpuquota_preemption_victims_total{namespace=\"$NSA\",quota=\"team\",reason=\"WithinQuota\"}")"

# ------------------------------------------------------------ 4. safety
bor_never "$SAMPLES" '$1 > 32 || $2 > 16 || $1 + $2 > 32' \
    "never A above hard + borrowingLimit (32Gi), B above hard (16Gi), the tenant above 32Gi"
finish
