#!/usr/bin/env bash
# Borrowing and reclaim in a cohort of tenants (docs/queueing.md,
# "Borrowing and reclaim") against a tenant who bends them, each team an
# edit tenant of its own namespace (the administrator only makes the
# GPUTenantQuotas and a PriorityClass). Tenants l (lender, reclaimWithinCohort
# Any), a and c (borrowingLimit 16Gi) name cohort e2e-ca, hard 16Gi each:
#   1. the borrowing mark is gpuquota's: a pod created with
#      gpuquota.io/borrowing "false" and admitted above hard is marked
#      "true"; a tenant's removal or change of the mark is refused;
#   2. stale marks: a borrowed above its hard, then its pod within the
#      share ended, so a's marked pod borrows nothing; c borrows 16Gi on
#      pods of a higher priority. l's reclaim evicts c's newest borrowing
#      pod, never a's (which is of the lowest priority and would otherwise
#      be taken first), and only one of c's;
#   3. a half-marked group: c runs a group of two within its share, ends
#      one member, runs a pod within its share, then a replacement member
#      above it (marked). c borrows 8Gi through a group whose other member
#      is unmarked; l's reclaim evicts that group whole, and l's pod starts.
#   Sampled every 0.2 s throughout: no tenant above hard + 16Gi, l never
#   above its hard, the cohort never above 48Gi.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
NSL=e2e-ca-l NSA=e2e-ca-a NSC=e2e-ca-c
SAMPLES=$E2E/ca-samples
cleanup() {
    [[ -n ${sampler:-} ]] && kill "$sampler" 2>/dev/null
    kubectl delete namespace "$NSL" "$NSA" "$NSC" --wait=false >/dev/null 2>&1
    kubectl delete gputenantquota e2e-ca-l e2e-ca-a e2e-ca-c --ignore-not-found >/dev/null 2>&1
    kubectl delete priorityclass e2e-ca-high --ignore-not-found >/dev/null 2>&1
}
trap cleanup EXIT

for n in $NSL $NSA $NSC; do
    ns "$n" || { fail "namespace $n"; finish; }
    tenant_kubeconfig "$n" team "$E2E/$n.kubeconfig" || { fail "tenant kubeconfig $n"; finish; }
done
as() { local n=$1; shift; kubectl --kubeconfig "$E2E/$n.kubeconfig" -n "$n" "$@"; }
printf 'apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: e2e-ca-high}\nvalue: 1000\n' |
    kubectl apply -f - >/dev/null
tenant() { # NAME NAMESPACE [SPEC-FIELD...]
    local name=$1 n=$2 f
    shift 2
    {
        printf 'apiVersion: gpuquota.io/v1alpha1\nkind: GPUTenantQuota\nmetadata: {name: %s}\n' "$name"
        printf 'spec:\n  namespaces: [%s]\n  hard: {gpu-memory: 16Gi}\n  whenExceeded: Queue\n  cohort: e2e-ca\n' "$n"
        for f in "$@"; do printf '  %s\n' "$f"; done
    } | kubectl apply -f - >/dev/null
}
tenant e2e-ca-l "$NSL" 'preemption: {reclaimWithinCohort: Any}'
tenant e2e-ca-a "$NSA" 'borrowingLimit: {gpu-memory: 16Gi}'
tenant e2e-ca-c "$NSC" 'borrowingLimit: {gpu-memory: 16Gi}'

# pod NS NAME MEMORY [PRIORITYCLASS] [METADATA-EXTRA]: a tenant creates a GPU pod.
pod() {
    as "$1" create -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $2${5:+, $5}}
spec:
  terminationGracePeriodSeconds: 0
${4:+  priorityClassName: $4}
$(containers "gpuquota.io/gpu-memory: $3" '  ')
EOF
}
mark() { kubectl -n "$1" get pod "$2" -o jsonpath='{.metadata.annotations.gpuquota\.io/borrowing}' 2>/dev/null; }
gone() { [[ -z $(kubectl -n "$1" get pod "$2" -o name 2>/dev/null) ]]; }
bor_sample "$SAMPLES" "$NSL" "$NSA" "$NSC"
# reset: every pod of the three namespaces gone, their Events too.
reset() {
    local n
    for n in $NSL $NSA $NSC; do
        kubectl -n "$n" delete pod --all --grace-period=0 --force --wait=false >/dev/null 2>&1
    done
    for n in $NSL $NSA $NSC; do
        eventually 120 bash -c "[[ -z \$(kubectl -n $n get pods -o name) ]]"
        kubectl -n "$n" delete events --all >/dev/null 2>&1
    done
}

# ------------------------------------------------------------ 1. the mark is gpuquota's
pod "$NSA" a-1 16Gi
eventually 60 bor_admitted "$NSA" a-1
check "1: a's 16Gi pod starts within its hard" "" "$(mark "$NSA" a-1)"
pod "$NSA" a-2 8Gi "" 'annotations: {gpuquota.io/borrowing: "false"}'
check "1: a creates a pod saying gpuquota.io/borrowing false" 0 $?
eventually 60 bor_admitted "$NSA" a-2
check "1: admitted above a's hard, it is marked borrowing whatever a wrote" "true" "$(mark "$NSA" a-2)"
out=$(as "$NSA" annotate pod a-2 gpuquota.io/borrowing- 2>&1)
check_match "1: a may not remove the mark" "denied the request" "$out"
out=$(as "$NSA" annotate pod a-2 --overwrite gpuquota.io/borrowing=false 2>&1)
check_match "1: a may not change the mark" "denied the request" "$out"
out=$(as "$NSA" annotate pod a-1 gpuquota.io/borrowing=true 2>&1)
check_match "1: a may not add the mark to a pod admitted within its share" "denied the request" "$out"
check "1: the mark stays" "true" "$(mark "$NSA" a-2)"

# ------------------------------------------------------------ 2. stale marks
as "$NSA" delete pod a-1 --wait=false >/dev/null
eventually 60 gone "$NSA" a-1
# a uses 8Gi of its 16Gi: its marked a-2 borrows nothing now.
pod "$NSC" c-1 16Gi e2e-ca-high
eventually 60 bor_admitted "$NSC" c-1
pod "$NSC" c-2 8Gi e2e-ca-high
eventually 60 bor_admitted "$NSC" c-2
# creationTimestamp has whole seconds: c-3 must be newer than c-2 in them
# for "newest first" to name one pod (in the same second either may go).
sleep 1.1
pod "$NSC" c-3 8Gi e2e-ca-high
eventually 60 bor_admitted "$NSC" c-3
check "2: c runs 16Gi within its hard and 16Gi borrowed, marked" "own true true" \
    "$(bor_pods "$NSC" | cut -d= -f2 | tr '\n' ' ' | sed 's/ $//')"
# The cohort has l's 16Gi and a's 8Gi unused less c's 16Gi above: 8Gi free.
pod "$NSL" l-1 16Gi
eventually 60 bor_admitted "$NSL" l-1
check "2: l's pod within its hard starts after a reclaim" "" "$(bor_gates "$NSL" l-1)"
check "2: a's stale-marked pod (lowest priority, borrowing nothing) is not evicted" "" \
    "$(bor_events "$NSA" Preempted)"
check "2: exactly c's newest borrowing pod is evicted" "c-3" "$(bor_events "$NSC" Preempted | tr '\n' ' ' | sed 's/ $//')"
check "2: a's pod runs on" "true" "$(mark "$NSA" a-2)"
reset

# ------------------------------------------------------------ 3. a half-marked group
grp() { echo "labels: {gpuquota.io/pod-group: g}, annotations: {gpuquota.io/pod-group-size: \"2\"}"; }
pod "$NSA" a-full 16Gi
eventually 60 bor_admitted "$NSA" a-full
pod "$NSC" g-1 8Gi "" "$(grp)"
pod "$NSC" g-2 8Gi "" "$(grp)"
eventually 60 bor_admitted "$NSC" g-1
eventually 30 bor_admitted "$NSC" g-2
check "3: c's group of two starts within c's hard, unmarked" "g-1=own g-2=own" \
    "$(bor_pods "$NSC" | tr '\n' ' ' | sed 's/ $//')"
as "$NSC" delete pod g-2 --wait=false >/dev/null
eventually 60 gone "$NSC" g-2
pod "$NSC" p 8Gi
eventually 60 bor_admitted "$NSC" p
pod "$NSC" g-3 8Gi "" "$(grp)"
eventually 60 bor_admitted "$NSC" g-3
check "3: c borrows 8Gi through a replacement member, the rest of its pods unmarked" \
    "g-1=own g-3=true p=own" "$(bor_pods "$NSC" | tr '\n' ' ' | sed 's/ $//')"
# The cohort has l's 16Gi unused less c's 8Gi above: l's 16Gi pod needs a reclaim.
pod "$NSL" l-2 16Gi
eventually 60 bor_admitted "$NSL" l-2
check "3: l's pod within its hard starts: the group borrowing is reclaimed" "" "$(bor_gates "$NSL" l-2)"
check "3: c's group is evicted whole, its pod within the share is not" "g-1 g-3" \
    "$(bor_events "$NSC" Preempted | tr '\n' ' ' | sed 's/ $//')"
check "3: nobody of a is evicted" "" "$(bor_events "$NSA" Preempted)"

# ------------------------------------------------------------ safety
bor_never "$SAMPLES" '$1 > 16 || $2 > 32 || $3 > 32 || $1 + $2 + $3 > 48' \
    "never a tenant above hard + borrowingLimit, l above hard, the cohort above 48Gi"
finish
