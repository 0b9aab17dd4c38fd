#!/usr/bin/env bash
# Preemption inside a quota (docs/queueing.md, "Preemption") against tenants
# who bend it, each acting as a ServiceAccount bound to edit in its own
# namespace (the administrator only makes quotas, PriorityClasses and a
# node):
#   1. tenant A queues 40 top-priority pods that can never preempt (the only
#      pod in their reach has their priority): tenant B's high pod, which
#      may evict B's own low pod, still preempts;
#   2. a pod group of a high and a low member evicts no pod of a priority
#      between theirs: a group preempts as each of its members;
#   3. a high group of four 2Gi pods evicts one 8Gi low pod, not one per
#      member, while its victims take their grace period to stop;
#   4. two high pods behind four low ones evict two, and are admitted as
#      soon as their victims' grace deadline passes (no event marks it);
#   5. under a shared GPUTenantQuota, A's top pod waiting for A's own pod
#      that is leaving for a long grace period does not keep that room
#      from B a second time.
# Victims that take their time to stop are pods bound to a node no kubelet
# runs (an administrator's Node object): once deleted they stay, counted,
# until their grace deadline, as on a node where containers stop slowly.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
NSA=e2e-pa-a
NSB=e2e-pa-b
TQ=e2e-pa-shared
TKA=$E2E/pa-a.kubeconfig
TKB=$E2E/pa-b.kubeconfig
cleanup() {
    kubectl -n "$NSA" delete pod --all --grace-period=0 --force --wait=false >/dev/null 2>&1
    kubectl -n "$NSB" delete pod --all --grace-period=0 --force --wait=false >/dev/null 2>&1
    kubectl delete namespace "$NSA" "$NSB" --wait=false >/dev/null 2>&1
    kubectl delete gputenantquota "$TQ" --ignore-not-found >/dev/null 2>&1
    kubectl delete node e2e-pa-slow --ignore-not-found >/dev/null 2>&1
    kubectl delete priorityclass e2e-pa-top e2e-pa-high e2e-pa-mid e2e-pa-low --ignore-not-found >/dev/null 2>&1
}
trap cleanup EXIT
ns "$NSA" || { fail "namespace $NSA"; finish; }
ns "$NSB" || { fail "namespace $NSB"; finish; }
tenant_kubeconfig "$NSA" tenant "$TKA" || { fail "tenant kubeconfig"; finish; }
tenant_kubeconfig "$NSB" tenant "$TKB" || { fail "tenant kubeconfig"; finish; }
ta() { kubectl --kubeconfig "$TKA" -n "$NSA" "$@"; }
tb() { kubectl --kubeconfig "$TKB" -n "$NSB" "$@"; }
for pc in top:100000 high:1000 mid:500 low:10; do
    printf 'apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: e2e-pa-%s}\nvalue: %s\n' \
        "${pc%%:*}" "${pc#*:}" | kubectl apply -f - >/dev/null
done
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata: {name: e2e-pa-slow, labels: {kubernetes.io/hostname: e2e-pa-slow}}
EOF

# pod NAME PRIORITYCLASS [MEM] [METADATA-EXTRA]: a GPU pod as YAML.
pod() {
    cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1${4:+, $4}}
spec:
  priorityClassName: e2e-pa-$2
  terminationGracePeriodSeconds: 0
$(containers "gpuquota.io/gpu-memory: ${3:-8Gi}" '  ')
EOF
}
# slow NAME PRIORITYCLASS [GRACE]: an 8Gi pod bound to the node no kubelet runs.
slow() { pod "$1" "$2" | sed "s/terminationGracePeriodSeconds: 0/terminationGracePeriodSeconds: ${3:-30}\n  nodeName: e2e-pa-slow/"; }
gates() { kubectl -n "$1" get pod "$2" -o json 2>/dev/null | jq -r '[.spec.schedulingGates[]?.name] | join(",")'; }
ungated() { [[ $(kubectl -n "$1" get pod "$2" -o jsonpath='{.metadata.uid}' 2>/dev/null) && -z $(gates "$1" "$2") ]]; }
n_preempted() { kubectl -n "$1" get events -o json | jq '[.items[] | select(.reason == "Preempted")] | length'; }
used_is() { [[ $(kubectl -n "$1" get gq "$2" -o jsonpath='{.status.used.gpu-memory}') == "$3" ]]; }
# reset NS: every pod of NS gone (forced: the slow node's never finish), its Events too.
reset() {
    kubectl -n "$1" delete pod --all --grace-period=0 --force --wait=false >/dev/null 2>&1
    eventually 120 bash -c "[[ -z \$(kubectl -n $1 get pods -o name) ]]"
    kubectl -n "$1" delete events --all >/dev/null 2>&1
}

# ------------------------------------------------------------ 1. nobody to evict
quota "$NSA" qa '{gpu-memory: 8Gi}' 'whenExceeded: Queue' 'preemption: {withinQuota: LowerPriority}'
quota "$NSB" qb '{gpu-memory: 8Gi}' 'whenExceeded: Queue' 'preemption: {withinQuota: LowerPriority}'
pod a-run top | ta create -f - >/dev/null
eventually 30 ungated "$NSA" a-run
pod b-low low | tb create -f - >/dev/null
eventually 30 ungated "$NSB" b-low
ta create -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: a-wait}
spec:
  replicas: 40
  selector: {matchLabels: {app: a-wait}}
  template:
    metadata: {labels: {app: a-wait}}
    spec:
      priorityClassName: e2e-pa-top
      terminationGracePeriodSeconds: 0
$(containers 'gpuquota.io/gpu-memory: 8Gi' '      ')
EOF
check "1: tenant A creates 40 top-priority pods" 0 $?
forty_queued() { [[ $(kubectl -n "$NSA" get pods -l app=a-wait -o json | jq '[.items[] | select(.spec.schedulingGates)] | length') == 40 ]]; }
eventually 90 forty_queued
check "1: all 40 queue behind A's full quota" 0 $?
pod b-high high | tb create -f - >/dev/null
eventually 30 ungated "$NSB" b-high
check "1: B's high pod preempts though A's pods ahead of it can never preempt" "" "$(gates "$NSB" b-high)"
check "1: one eviction in B" 1 "$(n_preempted "$NSB")"
check "1: none in A" 0 "$(n_preempted "$NSA")"
ta delete deployment a-wait >/dev/null 2>&1
reset "$NSA"
reset "$NSB"

# ------------------------------------------------------------ 2. a group of mixed priorities
quota "$NSA" qa '{gpu-memory: 16Gi}' 'whenExceeded: Queue' 'preemption: {withinQuota: LowerPriority}'
for m in m-1 m-2; do pod $m mid | ta create -f - >/dev/null; done
eventually 30 ungated "$NSA" m-1
eventually 30 ungated "$NSA" m-2
grp='labels: {gpuquota.io/pod-group: mixed}, annotations: {gpuquota.io/pod-group-size: "2"}'
pod g-hi high 8Gi "$grp" | ta create -f - >/dev/null
pod g-lo low 8Gi "$grp" | ta create -f - >/dev/null
sleep 6
check "2: no mid pod is evicted for a group with a low member" 0 "$(n_preempted "$NSA")"
check "2: the group waits" "gpuquota.io/quota,gpuquota.io/quota" "$(gates "$NSA" g-hi),$(gates "$NSA" g-lo)"
reset "$NSA"

# ------------------------------------------------------------ 3. a group evicts once
quota "$NSA" qa '{gpu-memory: 32Gi}' 'whenExceeded: Queue' 'preemption: {withinQuota: LowerPriority}'
for m in l-1 l-2 l-3 l-4; do slow $m low | ta create -f - >/dev/null; done
eventually 30 used_is "$NSA" qa 32Gi
grp='labels: {gpuquota.io/pod-group: four}, annotations: {gpuquota.io/pod-group-size: "4"}'
for m in f-0 f-1 f-2 f-3; do pod $m high 2Gi "$grp" | ta create -f - >/dev/null; done
eventually 20 bash -c "(( \$(kubectl -n $NSA get events -o json | jq '[.items[] | select(.reason == \"Preempted\")] | length') >= 1 ))"
sleep 6
check "3: exactly one low pod evicted for the group" 1 "$(n_preempted "$NSA")"
reset "$NSA"

# ------------------------------------------------------------ 4. two preemptors, slow victims
for m in l-1 l-2 l-3 l-4; do slow $m low | ta create -f - >/dev/null; done
eventually 30 used_is "$NSA" qa 32Gi
pod h-1 high | ta create -f - >/dev/null
pod h-2 high | ta create -f - >/dev/null
eventually 20 bash -c "(( \$(kubectl -n $NSA get events -o json | jq '[.items[] | select(.reason == \"Preempted\")] | length') >= 2 ))"
sleep 6
check "4: exactly two low pods evicted for two high ones" 2 "$(n_preempted "$NSA")"
# Victims count until deletionTimestamp + grace, 60 s after their eviction.
eventually 100 ungated "$NSA" h-1
eventually 10 ungated "$NSA" h-2
check "4: both admitted once the victims' deadline passed" "," "$(gates "$NSA" h-1),$(gates "$NSA" h-2)"
reset "$NSA"

# ------------------------------------------------------------ 5. a hold counted twice
kubectl label namespace "$NSA" "$NSB" e2e-pa-shared=yes --overwrite >/dev/null
{ tenant_quota_yaml "$TQ" '{e2e-pa-shared: "yes"}' '{gpu-memory: 24Gi}'; printf '  whenExceeded: Queue\n'; } | kubectl apply -f - >/dev/null
quota "$NSA" qa '{gpu-memory: 8Gi}' 'whenExceeded: Queue' 'preemption: {withinQuota: LowerPriority}'
quota "$NSB" qb '{gpu-memory: 32Gi}' 'whenExceeded: Queue'
slow a-slow low 600 | ta create -f - >/dev/null
eventually 30 used_is "$NSA" qa 8Gi
ta delete pod a-slow --wait=false >/dev/null
sleep 2 # the controller's pod cache sees it leaving (else it would be a victim)
pod a-p top | ta create -f - >/dev/null
sleep 4
check "5: A's top pod waits for A's leaving pod" "gpuquota.io/quota" "$(gates "$NSA" a-p)"
pod b-1 low | tb create -f - >/dev/null
pod b-2 low | tb create -f - >/dev/null
eventually 20 ungated "$NSB" b-2
check "5: B gets both its pods: A's hold does not count A's leaving pod again" "," "$(gates "$NSB" b-1),$(gates "$NSB" b-2)"
check "5: nobody evicted" 0 "$(n_preempted "$NSA")"
finish
