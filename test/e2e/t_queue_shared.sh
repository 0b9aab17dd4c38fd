#!/usr/bin/env bash
# A StrictFIFO tenant quota shared by two tenants (docs/queueing.md,
# "Strategies"): a pod that its own namespace's quota holds back must not
# hold the shared line, or one tenant (edit role in its own namespace) stops
# every other tenant's pods while the shared quota has room.
#   1. tenant A fills its namespace quota and queues one more pod; tenant B's
#      pod is admitted at once under the shared quota;
#   2. a pod that lacks room in the shared quota itself does hold the line:
#      B's next pod waits behind it, with an Event that says so, until it is
#      gone;
#   3. at most maxQueuedPods pods wait on one GPUQuota (here 2): tenant A's
#      next queued pod is refused with the reason, B's pods are untouched.
# Every create and delete runs as the tenants' own ServiceAccounts.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

NSA=e2e-shared-a NSB=e2e-shared-b TQ=e2e-shared-strict
cleanup() {
    if [[ -f $E2E/config.yaml.queue-cap ]]; then
        mv "$E2E/config.yaml.queue-cap" "$E2E/config.yaml"
        webhooks 3 >/dev/null 2>&1
    fi
    kubectl delete namespace "$NSA" "$NSB" --ignore-not-found --wait=false >/dev/null 2>&1
    kubectl delete gputenantquota "$TQ" --ignore-not-found >/dev/null 2>&1
    rm -f "$KA" "$KB"
}
KA=$(mktemp) KB=$(mktemp)
trap cleanup EXIT

for n in "$NSA" "$NSB"; do ns "$n" tenant-group=e2e-shared-strict || { fail "namespace $n"; finish; }; done
tenant_kubeconfig "$NSA" tenant "$KA" || { fail "tenant kubeconfig in $NSA"; finish; }
tenant_kubeconfig "$NSB" tenant "$KB" || { fail "tenant kubeconfig in $NSB"; finish; }
ta() { kubectl --kubeconfig "$KA" -n "$NSA" "$@"; }
tb() { kubectl --kubeconfig "$KB" -n "$NSB" "$@"; }
{
    tenant_quota_yaml "$TQ" '{tenant-group: e2e-shared-strict}' '{gpu-memory: 32Gi}'
    printf '  whenExceeded: Queue\n  queueingStrategy: StrictFIFO\n'
} | kubectl apply -f - >/dev/null
quota "$NSA" qa '{gpu-memory: 8Gi}' 'whenExceeded: Queue'
quota "$NSB" qb '{gpu-memory: 32Gi}' 'whenExceeded: Queue'
seen() { gpu_pod probe 1Gi | kubectl -n "$1" create --dry-run=server -o json -f - | jq -e '.spec.schedulingGates'; }
eventually 15 seen "$NSA" || fail "the webhooks never saw the Queue quotas"
eventually 15 seen "$NSB" || true

gates() { "$1" get pod "$2" -o jsonpath='{.spec.schedulingGates[*].name}' 2>/dev/null; }
ungated() { [[ -n $("$1" get pod "$2" -o name 2>/dev/null) && -z $(gates "$1" "$2") ]]; }
tq_used() { kubectl get gputenantquota "$TQ" -o jsonpath='{.status.used.gpu-memory}'; }
ev() { # TENANT POD: the Queued Events' messages
    "$1" get events --field-selector "involvedObject.name=$2,reason=Queued" \
        -o jsonpath='{.items[*].message}' 2>/dev/null
}
has_ev() { [[ -n $(ev "$1" "$2") ]]; }

# ------------------------------- 1. held by its own quota: holds nobody else
gpu_pod a1 8Gi | ta create -f - >/dev/null 2>&1
eventually 15 ungated ta a1 || fail "a1 is ungated"
next_second
gpu_pod a2 8Gi | ta create -f - >/dev/null 2>&1
eventually 10 has_ev ta a2 || true
check_match "a2 waits for tenant A's own quota" "exceeded quota: qa" "$(ev ta a2)"
next_second
gpu_pod b1 4Gi | tb create -f - >/dev/null 2>&1
eventually 15 ungated tb b1 || true
check "tenant B's pod is admitted although A's a2 is older and waits" "" "$(gates tb b1)"
is12() { [[ $(tq_used) == 12Gi ]]; }
eventually 15 is12 || true
check "the shared quota counts a1 and b1" "12Gi" "$(tq_used)"
check "a2 still waits" "gpuquota.io/quota" "$(gates ta a2)"

# -------------------------- 2. short in the shared quota: holds the line
gpu_pod b2 24Gi | tb create -f - >/dev/null 2>&1 # 12 + 24 > 32: waits in the shared line
eventually 10 has_ev tb b2 || true
next_second
gpu_pod b3 4Gi | tb create -f - >/dev/null 2>&1
eventually 10 has_ev tb b3 || true
check_match "b3 waits behind b2, which lacks room in the shared quota" \
    "waiting in line behind 1 pod\(s\) of tenant quota $TQ \(StrictFIFO\) that do not fit yet" \
    "$(ev tb b3)"
check "b3 is held although it would fit" "gpuquota.io/quota" "$(gates tb b3)"
tb delete pod b2 --wait=false >/dev/null 2>&1
eventually 15 ungated tb b3 || true
check "once b2 is gone, b3 is admitted" "" "$(gates tb b3)"

# ------------------------------- 3. at most maxQueuedPods wait on one quota
cp "$E2E/config.yaml" "$E2E/config.yaml.queue-cap"
sed -i 's/^maxQueuedPods: .*/maxQueuedPods: 2/' "$E2E/config.yaml"
grep -q '^maxQueuedPods: 2$' "$E2E/config.yaml" || fail "the configuration sets maxQueuedPods"
webhooks 3 || fail "the webhooks restart with maxQueuedPods: 2"
next_second
gpu_pod a3 8Gi | ta create -f - >/dev/null 2>&1 # a2 and a3 wait for qa
queued2() { [[ $(kubectl -n "$NSA" get gpuquota qa -o jsonpath='{.status.queuedPods}') == 2 ]]; }
eventually 15 queued2 || true
check "quota qa counts two queued pods" 2 "$(kubectl -n "$NSA" get gpuquota qa -o jsonpath='{.status.queuedPods}')"
check_match "a third queued pod is refused with the reason" \
    "quota $NSA/qa already holds 2 queued pods, the most the configuration allows \(maxQueuedPods 2\)" \
    "$(gpu_pod a4 8Gi | ta create -f - 2>&1)"
# The shared tenant quota holds A's queued pods too; its count refuses no
# one (it would let A refuse B's pods).
check "tenant B's pods are not held by it" "created" \
    "$(gpu_pod b4 1Gi | tb create -f - 2>&1 | grep -o created)"
mv "$E2E/config.yaml.queue-cap" "$E2E/config.yaml"
webhooks 3 || fail "the webhooks restart with the suite's configuration"
finish
