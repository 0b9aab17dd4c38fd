#!/usr/bin/env bash
# Preemption and reclaim under churn (docs/queueing.md, "Preemption" and
# "Borrowing") on the real control plane, kube-controller-manager running:
# for GQ_E2E_CHURN_SECONDS (default 120; `make soak` runs 600) two edit
# tenants of one GPUTenantQuota (64Gi) keep changing what they ask:
#   - team A (hard 32Gi, borrowingLimit 16Gi, withinQuota LowerPriority)
#     runs a Deployment of six low-priority 8Gi pods, two of them on what it
#     borrows from B, and keeps starting Jobs of mid or high priority;
#   - team B (hard 32Gi, withinQuota and reclaimWithinCohort LowerPriority)
#     scales a Deployment of low-priority pods between 0 and 4 and starts
#     high-priority Jobs.
# kwok runs every admitted pod; a Job's pods complete at once, so each Job
# pod that finds its quota full preempts (or reclaims) one pod, whose
# ReplicaSet makes it again, which queues. Checked:
#   1. at every pod change the API server went through (a watch, in
#      resourceVersion order, test/e2e/tools/held_watch.py): A never holds
#      more than hard + borrowingLimit (48Gi), B never more than hard
#      (32Gi), both together never more than the tenant's 64Gi;
#   2. no pod is evicted twice, and no preemptor evicts twice;
#   3. every victim has a lower priority than its preemptor (so no
#      preemption loop and no ping-pong: a pod made again never preempts
#      back), and preemption and reclaim both happened;
#   4. once the churn stops, every preemptor is admitted (or done), and
#      every quota's status.used is what its admitted pods hold.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
NSA=e2e-churn-a NSB=e2e-churn-b TQ=e2e-churn
KA=$E2E/churn-a.kubeconfig KB=$E2E/churn-b.kubeconfig
SECONDS_RUN=${GQ_E2E_CHURN_SECONDS:-120}
HELD=$E2E/churn-held
cleanup() {
    [[ -n ${watcher:-} ]] && kill "$watcher" 2>/dev/null
    kubectl delete namespace "$NSA" "$NSB" --wait=false >/dev/null 2>&1
    kubectl delete gputenantquota "$TQ" --ignore-not-found >/dev/null 2>&1
    kubectl delete priorityclass e2e-ch-low e2e-ch-mid e2e-ch-high --ignore-not-found >/dev/null 2>&1
}
trap cleanup EXIT

ns "$NSA" tenant=$TQ || { fail "namespace $NSA"; finish; }
ns "$NSB" tenant=$TQ || { fail "namespace $NSB"; finish; }
tenant_kubeconfig "$NSA" team "$KA" || { fail "tenant kubeconfig A"; finish; }
tenant_kubeconfig "$NSB" team "$KB" || { fail "tenant kubeconfig B"; finish; }
ta() { kubectl --kubeconfig "$KA" -n "$NSA" "$@"; }
tb() { kubectl --kubeconfig "$KB" -n "$NSB" "$@"; }
for pc in high:1000 mid:500 low:10; do
    printf 'apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: e2e-ch-%s}\nvalue: %s\n' \
        "${pc%%:*}" "${pc#*:}" | kubectl apply -f - >/dev/null
done
kubectl apply -f - >/dev/null <<EOF
apiVersion: gpuquota.io/v1alpha1
kind: GPUTenantQuota
metadata: {name: $TQ}
spec:
  namespaceSelector: {matchLabels: {tenant: $TQ}}
  hard: {gpu-memory: 64Gi}
  whenExceeded: Queue
EOF
quota "$NSA" team '{gpu-memory: 32Gi}' 'whenExceeded: Queue' 'borrowingLimit: {gpu-memory: 16Gi}' \
    'preemption: {withinQuota: LowerPriority}'
quota "$NSB" team '{gpu-memory: 32Gi}' 'whenExceeded: Queue' \
    'preemption: {withinQuota: LowerPriority, reclaimWithinCohort: LowerPriority}'

kubectl get pods -A -w -o json --output-watch-events 2>/dev/null |
    python3 "$(dirname "$0")/tools/held_watch.py" --limit "$NSA=48" --limit "$NSB=32" \
        --total 64 --out "$HELD" &
watcher=$!

# deployment NAME CLASS REPLICAS: 8Gi pods of one priority class, as YAML.
deployment() {
    cat <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1}
spec:
  replicas: $3
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec:
      priorityClassName: e2e-ch-$2
      terminationGracePeriodSeconds: 0
$(containers 'gpuquota.io/gpu-memory: 8Gi' '      ')
EOF
}
# job NAME CLASS: two 8Gi pods, one after the other; a pod preempted
# (condition DisruptionTarget) is made again without counting as a failure.
job() {
    cat <<EOF
apiVersion: batch/v1
kind: Job
metadata: {name: $1}
spec:
  completions: 2
  parallelism: 1
  backoffLimit: 0
  podFailurePolicy:
    rules: [{action: Ignore, onPodConditions: [{type: DisruptionTarget}]}]
  template:
    spec:
      restartPolicy: Never
      priorityClassName: e2e-ch-$2
      terminationGracePeriodSeconds: 0
$(containers 'gpuquota.io/gpu-memory: 8Gi' '      ')
EOF
}
deployment a-low low 6 | ta create -f - >/dev/null
deployment b-low low 0 | tb create -f - >/dev/null
admitted() { kubectl -n "$1" get pods -o json | jq '[.items[] | select(.metadata.deletionTimestamp == null and ([.spec.schedulingGates[]?] | length) == 0)] | length'; }
eventually 60 bash -c "[[ \$(kubectl -n $NSA get pods -o json | jq '[.items[] | select(([.spec.schedulingGates[]?] | length) == 0)] | length') == 6 ]]"
check "A's six low pods start, two on what B leaves unused" 6 "$(admitted "$NSA")"

# ------------------------------------------------------------ the churn
RANDOM=25
end=$(($(date +%s) + SECONDS_RUN))
jobs_a=0 jobs_b=0 scales=0 i=0
while (($(date +%s) < end)); do
    i=$((i + 1))
    r=$((RANDOM % 10))
    if ((r < 4)); then
        cls=$([[ $((RANDOM % 2)) == 0 ]] && echo high || echo mid)
        job "ja-$i-$cls" "$cls" | ta create -f - >/dev/null && jobs_a=$((jobs_a + 1))
    elif ((r < 7)); then
        job "jb-$i-high" high | tb create -f - >/dev/null && jobs_b=$((jobs_b + 1))
    else
        tb scale deployment b-low --replicas=$((RANDOM % 5)) >/dev/null && scales=$((scales + 1))
    fi
    sleep 3
done
echo "# churn: $SECONDS_RUN s, $jobs_a Jobs in A, $jobs_b in B, $scales scalings of B"
tb scale deployment b-low --replicas=0 >/dev/null

# ------------------------------------------------------------ 4. it settles
# Every pod that preempted is admitted or done, and no Job waits.
preemptors() { kubectl get events -A -o json | jq -r '[.items[] | select(.reason == "Preempting") | "\(.involvedObject.namespace) \(.involvedObject.name)"] | unique | .[]'; }
waiting_preemptors() {
    local n=0 ns name
    while read -r ns name; do
        [[ -z $ns ]] && continue
        [[ -n $(kubectl -n "$ns" get pod "$name" -o jsonpath='{.spec.schedulingGates}' 2>/dev/null) ]] && n=$((n + 1))
    done <<<"$(preemptors)"
    echo "$n"
}
eventually 120 bash -c "[[ \$(kubectl get jobs -A -o json | jq '[.items[] | select(.metadata.namespace | startswith(\"e2e-churn\")) | select((.status.succeeded // 0) < 2 and (.status.failed // 0) == 0)] | length') == 0 ]]"
check "every Job runs to its end" 0 "$(kubectl get jobs -A -o json | jq '[.items[] | select(.metadata.namespace | startswith("e2e-churn")) | select((.status.succeeded // 0) < 2)] | length')"
check "no preemptor is left waiting" 0 "$(waiting_preemptors)"
# status.used is what the admitted pods hold (GiB), once the recount has run.
used_gib() { kubectl -n "$1" get gq team -o jsonpath='{.status.used.gpu-memory}' | sed 's/Gi$//; s/^0$/0/'; }
held_gib() { kubectl -n "$1" get pods -o json | jq '[.items[] | select(.metadata.deletionTimestamp == null and ([.spec.schedulingGates[]?] | length) == 0 and (.status.phase != "Succeeded" and .status.phase != "Failed")) | .spec.containers[].resources.limits["aliyun.com/gpu-mem"] // "0" | tonumber] | add // 0'; }
settled() { [[ $(used_gib "$NSA") == $(held_gib "$NSA") && $(used_gib "$NSB") == $(held_gib "$NSB") ]]; }
eventually 60 settled
check "A's and B's status.used are what their admitted pods hold" "$(held_gib "$NSA") $(held_gib "$NSB")" "$(used_gib "$NSA") $(used_gib "$NSB")"
# What a run that did not settle leaves to read (the suite's folder goes
# at e2e_down): the quotas' status, the pods still gated, the leader and
# the controllers' last words.
if ! settled; then
    echo "# not settled: leader controller-$(leader)"
    for ns in "$NSA" "$NSB"; do
        echo "# $ns status: $(kubectl -n "$ns" get gq team -o json | jq -c '.status | del(.conditions)')"
        echo "# $ns gated: $(kubectl -n "$ns" get pods -o json | jq -c '[.items[] | select([.spec.schedulingGates[]?] | length > 0) | .metadata.name]')"
    done
    for n in 0 1; do tail -15 "$E2E/controller-$n.log" | sed "s/^/# controller-$n: /"; done
fi

# ------------------------------------------------------------ 1. never over
sleep 1
kill "$watcher" 2>/dev/null
watcher=
n=$(grep -cv '^OVER' "$HELD")
check_match "pod changes checked ($n)" "^[1-9][0-9]+$" "$n"
check "A never above 48Gi, B never above 32Gi, the tenant never above 64Gi" "" "$(grep '^OVER' "$HELD" | head -3 | tr '\n' ';')"

# ------------------------------------------------------------ 2. and 3. the evictions
# One line per Preempted Event (on the victim, naming its preemptor): the
# victim, how many times the Event was posted, the preemptor, its priority.
kubectl get events -A -o json | jq -r '.items[] | select(.reason == "Preempted") |
    "\(.involvedObject.namespace)/\(.involvedObject.name) \(.count // 1) \(.message | capture("by pod (?<p>[^ ]+) \\(priority (?<v>-?[0-9]+)\\)") | "\(.p) \(.v)")"' \
    >"$E2E/churn-preempted"
kubectl get events -A -o json | jq -r '.items[] | select(.reason == "Preempting") |
    "\(.involvedObject.namespace)/\(.involvedObject.name) \(.count // 1)"' >"$E2E/churn-preempting"
victims=$(wc -l <"$E2E/churn-preempted")
preemptions=$(wc -l <"$E2E/churn-preempting")
check_match "pods were preempted ($victims victims, $preemptions preemptors)" "^[1-9][0-9]*$" "$victims"
check "no pod evicted twice" "" "$({ cut -d' ' -f1 "$E2E/churn-preempted" | sort | uniq -d; awk '$2 > 1 {print $1}' "$E2E/churn-preempted"; } | head -3)"
check "no preemptor evicted twice" "" "$(awk '$2 > 1 {print $1}' "$E2E/churn-preempting" | head -3)"
check "no pod preempted twice by one preemptor" "" "$(cut -d' ' -f1,3 "$E2E/churn-preempted" | sort | uniq -d | head -3)"
# A victim's priority from its workload's name: -low- 10, -mid- 500, -high- 1000.
prio() { case $1 in *-low-*) echo 10 ;; *-mid-*) echo 500 ;; *-high-*) echo 1000 ;; *) echo unknown ;; esac; }
not_lower=
while read -r victim _ preemptor p; do
    v=$(prio "$victim")
    [[ $v == unknown || $v -ge $p ]] && not_lower+="$victim (by $preemptor at $p);"
done <"$E2E/churn-preempted"
check "every victim has a lower priority than its preemptor" "" "$not_lower"
reclaims=$(awk '$1 ~ /^e2e-churn-a\// && $3 ~ /^e2e-churn-b\//' "$E2E/churn-preempted" | wc -l)
check_match "B reclaimed from A's borrowers ($reclaims times)" "^[1-9][0-9]*$" "$reclaims"
echo "# evictions per preemption: $victims / $preemptions"
finish
