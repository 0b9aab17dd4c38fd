#!/usr/bin/env bash
# Preemption inside a quota (docs/queueing.md, "Preemption") on the real
# control plane, kube-controller-manager running (workload controllers make their pods
# again), every workload created by a tenant with the edit role (a
# Deployment, not a Job: kwok completes a Job's pods at once):
#   1. under withinQuota: Never a queued high-priority pod evicts nobody;
#   2. once the quota says LowerPriority it evicts exactly one of the two
#      low-priority pods of a Deployment, through the Eviction API: the
#      victim gets an Event naming the preemptor, the preemptor one naming
#      its victim, and it is ungated; the ReplicaSet makes the victim again,
#      which queues and does not preempt back;
#   3. a victim a PodDisruptionBudget protects is skipped for another: the
#      newest low pod is protected, so the older one goes;
#   4. a high-priority pod group evicts exactly the room it needs, whole;
#   5. nothing in reach (only pods of equal priority left): nobody is
#      evicted and the pod waits.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
NSP=e2e-preempt
TKC=$E2E/preempt-tenant.kubeconfig
trap 'kubectl delete namespace $NSP --wait=false >/dev/null 2>&1
      kubectl delete priorityclass e2e-pre-high e2e-pre-low --ignore-not-found >/dev/null 2>&1' EXIT

ns "$NSP" || { fail "namespace $NSP"; finish; }
tenant_kubeconfig "$NSP" tenant "$TKC" || { fail "tenant kubeconfig"; finish; }
tk() { kubectl --kubeconfig "$TKC" -n "$NSP" "$@"; }
kubectl apply -f - >/dev/null <<EOF
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: e2e-pre-high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: e2e-pre-low}
value: 10
EOF
quota "$NSP" team '{gpu-memory: 16Gi}' 'whenExceeded: Queue' 'preemption: {withinQuota: Never}'

# pod NAME PRIORITYCLASS [LABELS-FLOW-MAP]: an 8Gi pod, as YAML.
pod() {
    cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, labels: ${3:-{\}}}
spec:
  priorityClassName: $2
  terminationGracePeriodSeconds: 0
$(containers 'gpuquota.io/gpu-memory: 8Gi' '  ')
EOF
}
gates() { tk get pod "$1" -o json 2>/dev/null | jq -r '[.spec.schedulingGates[]?.name] | join(",")'; }
ungated() { [[ $(tk get pod "$1" -o jsonpath='{.metadata.uid}' 2>/dev/null) && -z $(gates "$1") ]]; }
gone() { ! tk get pod "$1" >/dev/null 2>&1; }
# live PREFIX: names of the pods whose name starts with PREFIX, not being deleted.
live() { tk get pods -o json | jq -r --arg p "$1" '[.items[] | select((.metadata.name | startswith($p)) and .metadata.deletionTimestamp == null) | .metadata.name] | sort | join(",")'; }
count_live() { live "$1" | tr ',' '\n' | grep -c .; }
events() { tk get events -o json | jq -r --arg r "$1" '[.items[] | select(.reason == $r) | "\(.involvedObject.name): \(.message)"] | sort | .[]'; }
n_events() { events "$1" | grep -c .; }
used_is() { [[ $(used "$NSP" team gpu-memory) == "$1" ]]; }

# ------------------------------------------------------------ 1. Never
tk create -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: low}
spec:
  replicas: 2
  selector: {matchLabels: {app: low}}
  template:
    metadata: {labels: {app: low}}
    spec:
      priorityClassName: e2e-pre-low
      terminationGracePeriodSeconds: 0
$(containers 'gpuquota.io/gpu-memory: 8Gi' '      ')
EOF
check "the tenant creates a Deployment of two low-priority pods" 0 $?
two_low_running() { [[ $(count_live low-) == 2 ]] && used_is 16Gi && for p in $(live low- | tr ',' ' '); do ungated "$p" || return 1; done; }
eventually 60 two_low_running
check "both low pods admitted: the quota is full" 16Gi "$(used "$NSP" team gpu-memory)"
low_before=$(live low-)
pod high-1 e2e-pre-high | tk create -f - >/dev/null
check "the tenant creates a high-priority pod" 0 $?
sleep 5
check "withinQuota Never: the high pod waits behind the gate" "gpuquota.io/quota" "$(gates high-1)"
check "withinQuota Never: no low pod is evicted" "$low_before" "$(live low-)"
check "withinQuota Never: no Preempted event" 0 "$(n_events Preempted)"

# ------------------------------------------------------------ 2. LowerPriority
quota "$NSP" team '{gpu-memory: 16Gi}' 'whenExceeded: Queue' 'preemption: {withinQuota: LowerPriority}'
eventually 30 ungated high-1
check "LowerPriority: the high pod is admitted" "" "$(gates high-1)"
eventually 20 bash -c "[[ \$(kubectl -n $NSP get events -o json | jq '[.items[] | select(.reason == \"Preempted\")] | length') -ge 1 ]]"
check "exactly one low pod was evicted" 1 "$(n_events Preempted)"
victim=$(events Preempted | head -1 | cut -d: -f1)
check_match "the victim is one of the two low pods" "^($(echo "$low_before" | tr ',' '|'))$" "$victim"
check_match "the victim's Event names the preemptor" \
    "preempted by pod $NSP/high-1 \\(priority 1000\\) to make room in quota team" "$(events Preempted)"
check_match "the preemptor's Event names its victim" \
    "high-1: evicting 1 pod\\(s\\) to make room in quota team: $NSP/$victim" "$(events Preempting)"
eventually 30 gone "$victim"
# The ReplicaSet makes its pod again: it queues behind the gate, low
# priority, and must not preempt anyone back.
remade() { [[ $(count_live low-) == 2 ]]; }
eventually 60 remade
again=$(live low- | tr ',' '\n' | grep -vxF "$(echo "$low_before" | tr ',' '\n' | grep -vxF "$victim")")
check_match "the ReplicaSet made the victim's pod again" "^low-" "$again"
sleep 5
check "the new low pod queues" "gpuquota.io/quota" "$(gates "$again")"
check "and preempts nobody back: still one eviction" 1 "$(n_events Preempted)"
check "the high pod keeps running" "" "$(gates high-1)"
survivor=$(echo "$low_before" | tr ',' '\n' | grep -vxF "$victim")
tk delete deployment low --wait=false >/dev/null 2>&1
tk delete pod "$again" "$survivor" --grace-period=0 >/dev/null 2>&1
eventually 60 used_is 8Gi

# ------------------------------------------------------------ 3. a budget
# Room for one more 8Gi pod: low-old, then (a second later) low-new, then
# a budget that forbids evicting low-new. The planner's first choice would
# be low-new (most recently admitted); the budget sends it to low-old.
pod low-old e2e-pre-low '{app: free}' | tk create -f - >/dev/null
eventually 30 ungated low-old
next_second
quota "$NSP" team '{gpu-memory: 24Gi}' 'whenExceeded: Queue' 'preemption: {withinQuota: LowerPriority}'
eventually 30 bash -c "[[ \$(kubectl -n $NSP get gq team -o jsonpath='{.spec.hard.gpu-memory}') == 24Gi ]]"
pod low-new e2e-pre-low '{app: protected}' | tk create -f - >/dev/null
eventually 30 ungated low-new
tk create -f - >/dev/null <<EOF
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: protected}
spec:
  maxUnavailable: 0
  selector: {matchLabels: {app: protected}}
EOF
check "the tenant creates a budget protecting low-new" 0 $?
pdb_ready() { [[ $(tk get pdb protected -o jsonpath='{.status.observedGeneration}') -ge 1 ]]; }
eventually 30 pdb_ready
pod high-2 e2e-pre-high | tk create -f - >/dev/null
eventually 30 ungated high-2
check "the high pod is admitted" "" "$(gates high-2)"
check_match "low-old was evicted for it" "low-old: preempted by pod $NSP/high-2" "$(events Preempted)"
check "low-new, under its budget, was not" "low-new" "$(live low-new)"
check "two evictions so far" 2 "$(n_events Preempted)"

# ------------------------------------------------------------ 4. a group
# In use: high-1, high-2, low-new (24Gi of 24Gi). A high group of two 8Gi
# pods needs 16Gi: only low-new is lower (and protected) - release the
# budget, and raise hard so that one eviction makes the room. The budget's
# refusal of low-new is remembered for 30 s: the controller asks again
# then.
tk delete pdb protected >/dev/null
quota "$NSP" team '{gpu-memory: 32Gi}' 'whenExceeded: Queue' 'preemption: {withinQuota: LowerPriority}'
eventually 30 bash -c "[[ \$(kubectl -n $NSP get gq team -o jsonpath='{.spec.hard.gpu-memory}') == 32Gi ]]"
for m in g-0 g-1; do
    pod "$m" e2e-pre-high | sed "s|metadata: {name: $m, labels: {}}|metadata: {name: $m, labels: {gpuquota.io/pod-group: train}, annotations: {gpuquota.io/pod-group-size: \"2\"}}|" |
        tk create -f - >/dev/null
done
eventually 60 ungated g-0
eventually 10 ungated g-1
check "the group is admitted whole" "," "$(gates g-0),$(gates g-1)"
check_match "low-new was evicted for the group" "low-new: preempted by pod $NSP/g-" "$(events Preempted)"
check "exactly one more eviction (three in all)" 3 "$(n_events Preempted)"

# ------------------------------------------------------------ 5. nothing in reach
# In use: high-1, high-2, g-0, g-1 (32Gi), all of priority 1000.
pod high-3 e2e-pre-high | tk create -f - >/dev/null
sleep 6
check "no pod of equal priority is evicted (LowerPriority)" 3 "$(n_events Preempted)"
check "high-3 waits" "gpuquota.io/quota" "$(gates high-3)"
finish
