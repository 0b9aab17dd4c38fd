#!/usr/bin/env bash
# Preemption figures on the real control plane (issue 25; docs/performance.md).
# Figures only: nothing is asserted.
#
#   scripts/bench-preempt.sh BUILD_DIR
#
# The control plane of test/e2e/suite.sh with gpuquota installed from
# deploy/ (3 webhook replicas, 2 controllers with leader election). One
# namespace, a Queue quota of 16Gi with preemption.withinQuota
# LowerPriority, kept full by a Deployment of two low-priority 8Gi pods.
# GQ_BENCH_PREEMPT_ROUNDS times (default 20): a high-priority 8Gi pod is
# created; the controller evicts one low pod and ungates it; it is deleted,
# and the pod the ReplicaSet made again fills the quota back. From
# kube-apiserver's audit log: time from the preemptor's create to its
# victim's eviction and to its ungate PATCH (p50, p99, max), and evictions
# per preemption (dry runs, which ask the budgets, left out).
set -euo pipefail
build=${1:?usage: bench-preempt.sh BUILD_DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GQ=$(cd "$build" && pwd)/gpuquota
ROUNDS=${GQ_BENCH_PREEMPT_ROUNDS:-20}
out=$(mktemp -d /tmp/gq-bench-preempt.XXXXXX)
export GQ_E2E_DIR=$out/e2e GQ ROOT
cleanup() {
    "$ROOT/test/e2e/suite.sh" down "$GQ_E2E_DIR" >/dev/null 2>&1 || true
    rm -rf "$out"
}
trap cleanup EXIT
"$ROOT/test/e2e/suite.sh" up "$GQ_E2E_DIR" "$GQ" >"$out/up.log" 2>&1
set +e
# shellcheck source=../test/e2e/lib.sh
source "$ROOT/test/e2e/lib.sh"
NSP=bp
ns "$NSP"
kubectl apply -f - >/dev/null <<YAML
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: bp-high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: bp-low}
value: 10
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: low, namespace: $NSP}
spec:
  replicas: 2
  selector: {matchLabels: {app: low}}
  template:
    metadata: {labels: {app: low}}
    spec:
      priorityClassName: bp-low
      terminationGracePeriodSeconds: 0
$(containers 'gpuquota.io/gpu-memory: 8Gi' '      ')
YAML
quota "$NSP" q '{gpu-memory: 16Gi}' 'whenExceeded: Queue' 'preemption: {withinQuota: LowerPriority}'
full() {
    [[ $(kubectl -n "$NSP" get pods -l app=low -o json | jq '[.items[] | select(.metadata.deletionTimestamp == null
        and ([.spec.schedulingGates[]?] | length) == 0)] | length') == 2 ]]
}
ungated() { [[ $(kubectl -n "$NSP" get pod "$1" -o json | jq '[.spec.schedulingGates[]?] | length') == 0 ]]; }
eventually 60 full
for r in $(seq -f '%03g' 1 "$ROUNDS"); do
    cat <<YAML | kubectl -n "$NSP" create -f - >/dev/null 2>&1
apiVersion: v1
kind: Pod
metadata: {name: high-$r}
spec:
  priorityClassName: bp-high
  terminationGracePeriodSeconds: 0
$(containers 'gpuquota.io/gpu-memory: 8Gi' '  ')
YAML
    eventually 30 ungated "high-$r" || echo "round $r: high-$r not admitted" >&2
    kubectl -n "$NSP" delete pod "high-$r" --grace-period=0 --force >/dev/null 2>&1
    eventually 60 full || echo "round $r: the quota did not fill again" >&2
done
sa=system:serviceaccount:$NS_SYS:gpuquota-controller
echo "## preemption: $ROUNDS high-priority pods into a full quota (load: $(cut -d' ' -f1-3 /proc/loadavg))"
jq -r --arg ns "$NSP" --arg sa "$sa" 'select(.stage == "ResponseComplete" and .objectRef.namespace == $ns
    and .objectRef.resource == "pods" and (.responseStatus.code // 0) < 300 and (
      (.verb == "create" and .objectRef.subresource == null and (.objectRef.name // "" | startswith("high-")))
      or (.verb == "create" and .objectRef.subresource == "eviction" and (.requestURI | contains("dryRun") | not))
      or (.verb == "patch" and .user.username == $sa and .objectRef.subresource == null
          and (.objectRef.name // "" | startswith("high-")))))
    | [.stageTimestamp, .verb, (.objectRef.subresource // ""), .objectRef.name] | @tsv' \
    "$E2E/cluster/audit.log" | sort | python3 -c '
import sys, datetime
def ts(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
created, evict, ungate, evictions, t_create = {}, [], [], 0, None
for line in sys.stdin:
    t, verb, sub, name = line.rstrip("\n").split("\t")
    if verb == "create" and not sub:
        t_create = ts(t)
        first = True
    elif sub == "eviction":
        evictions += 1
        if t_create is not None and first:
            evict.append((ts(t) - t_create) * 1000)
            first = False
    elif verb == "patch" and t_create is not None:
        ungate.append((ts(t) - t_create) * 1000)
        t_create = None
def show(what, d):
    if not d:
        print("%s: none" % what)
        return
    d.sort()
    q = lambda p: d[min(len(d) - 1, int(round(p * (len(d) - 1))))]
    print("%s: n %d  p50 %.0f ms  p99 %.0f ms  max %.0f ms" % (what, len(d), q(0.5), q(0.99), d[-1]))
show("create -> victim evicted", evict)
show("create -> preemptor ungated", ungate)
print("evictions per preemption: %.2f (%d evictions, %d preemptors ungated)" % (evictions / max(1, len(ungate)), evictions, len(ungate)))
'
