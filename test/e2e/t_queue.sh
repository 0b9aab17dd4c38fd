#!/usr/bin/env bash
# Queue instead of deny (docs/queueing.md) on the real control plane:
#   1. pods behind a full Queue quota get the gate gpuquota.io/quota, show
#      SchedulingGated, an Event in ResourceQuota's wording, and count as
#      queued (not used) in the status kubectl shows;
#   2. as capacity frees they start in priority-then-age order, each within
#      a second or so of the pod before it ending;
#   3. kube-scheduler places the ungated pods and leaves the gated ones alone;
#   4. nobody but gpuquota's controller removes the gate.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
NSQ=e2e-queue
trap 'kubectl delete namespace $NSQ --wait=false >/dev/null 2>&1
      kubectl delete priorityclass e2e-queue-high e2e-queue-low --ignore-not-found >/dev/null 2>&1' EXIT

ns "$NSQ"
kubectl apply -f - >/dev/null <<EOF
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: e2e-queue-high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: e2e-queue-low}
value: 10
EOF
quota "$NSQ" team '{gpu-memory: 8Gi}' 'whenExceeded: Queue'

# qpod NAME PRIORITYCLASS: an 8Gi pod of that priority, printed as YAML.
qpod() {
    cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  priorityClassName: $2
  containers:
  - name: main
    image: registry.example/cuda:12
    resources: {limits: {gpuquota.io/gpu-memory: 8Gi}}
EOF
}
create() { qpod "$1" "$2" | kubectl -n "$NSQ" create -f - 2>&1; }
gates() { kubectl -n "$NSQ" get pod "$1" -o json | jq -r '[.spec.schedulingGates[]?.name] | join(",")'; }
node_of() { kubectl -n "$NSQ" get pod "$1" -o jsonpath='{.spec.nodeName}'; }
ungated() { [[ -z $(gates "$1") ]]; }
scheduled() { [[ -n $(node_of "$1") ]]; }
# gone NAME: delete a pod now (it frees its charge once it is gone).
gone() { kubectl -n "$NSQ" delete pod "$1" --grace-period=0 --force >/dev/null 2>&1; }
status_of() { kubectl -n "$NSQ" get gq team -o json | jq -c "$1"; }

# The webhooks read the quota from their caches.
seen() { qpod probe e2e-queue-low | kubectl -n "$NSQ" create --dry-run=server -o json -f - | jq -e '.spec.schedulingGates'; }
eventually 15 seen

check_match "the first pod fits" "created" "$(create first e2e-queue-low)"
# The gate is added to every pod a Queue quota governs; this one fits, so
# the controller charges it and ungates it at once.
eventually 10 ungated first
check "a fitting pod is ungated by the controller" "" "$(gates first)"
eventually 20 scheduled first
check_match "kube-scheduler places it" "." "$(node_of first)"
eventually 15 bash -c "[[ \$(kubectl -n $NSQ get gq team -o jsonpath='{.status.used.gpu-memory}') == 8Gi ]]"

# creationTimestamp counts whole seconds: pods created in the same second
# are ordered by uid.
check_match "a pod over the quota is created, not denied" "created" "$(create low-old e2e-queue-low)"
next_second
check_match "a higher-priority pod is created later" "created" "$(create high e2e-queue-high)"
next_second
check_match "and another low one after it" "created" "$(create low-new e2e-queue-low)"
for p in low-old high low-new; do
    check "$p carries the gate" "gpuquota.io/quota" "$(gates "$p")"
done
queued3() { [[ $(status_of '.status.queuedPods') == 3 ]]; }
eventually 15 queued3
check "status counts them as queued, not used" '{"used":"8Gi","queued":"24Gi","pods":3}' \
    "$(status_of '{used: .status.used["gpu-memory"], queued: .status.queued["gpu-memory"], pods: .status.queuedPods}')"
table=$(kubectl -n "$NSQ" get gq team)
check_match "kubectl get gq shows QUEUED beside HARD and USED" \
    'HARD-MEM +USED-MEM .* QUEUED +QUEUED-MEM' "$(head -1 <<<"$table")"
check_match "with the queued pods and memory" \
    '^team +8Gi +8Gi +3 +24Gi +True' "$(tail -1 <<<"$table")"
check_match "kubectl get pods shows them SchedulingGated" "SchedulingGated" \
    "$(kubectl -n "$NSQ" get pod high --no-headers)"
ev() { kubectl -n "$NSQ" get events --field-selector "involvedObject.name=$1,reason=Queued" -o jsonpath='{.items[*].message}'; }
has_ev() { [[ -n $(ev "$1") ]]; }
eventually 15 has_ev low-old
check_match "a queued pod's Event says why in ResourceQuota's wording" \
    '^exceeded quota: team, requested: gpu-memory=8Gi, used: gpu-memory=8Gi, limited: gpu-memory=8Gi$' \
    "$(ev low-old)"
sleep 2
check "kube-scheduler leaves gated pods alone" "" "$(node_of high)$(node_of low-old)$(node_of low-new)"

# ------------------------------------------------------ gpuquota queue
cli=$("$GQ" queue -n "$NSQ" --config "$E2E/config.yaml")
echo "$cli"
check "gpuquota queue lists the pods in the order they will start" "high low-old low-new" \
    "$(awk 'NR > 1 {print $(NF - 4)}' <<<"$cli" | sed "s|^$NSQ/||" | tr '\n' ' ' | sed 's/ $//')"
check_match "with the quota, strategy and position first" \
    "^GPUQuota $NSQ/team +BestEffortFIFO +1 +$NSQ/high +1000 +8Gi +- +[0-9]+s\$" "$(sed -n 2p <<<"$cli")"
check "and as JSON for machines" '[[1,"high",1000,"8Gi"],[2,"low-old",10,"8Gi"],[3,"low-new",10,"8Gi"]]' \
    "$("$GQ" queue -n "$NSQ" -o json | jq -c '[.queues[0].pods[] | [.position, .name, .priority, .charge["gpu-memory"]]]')"
check "bad usage exits 2" "2" "$("$GQ" queue -o yaml >/dev/null 2>&1; echo $?)"

# ---------------------------------------------------- nobody else ungates
check_match "a user removing the gate is denied" \
    'denied the request: the scheduling gate gpuquota.io/quota is removed by gpuquota only' \
    "$(kubectl -n "$NSQ" patch pod low-new --type=json -p '[{"op":"remove","path":"/spec/schedulingGates/0"}]' 2>&1)"
check "and the gate stays" "gpuquota.io/quota" "$(gates low-new)"
# The validating webhook sees a user's update of the gate, never the
# controller's: its ungates skip the call (deploy/webhooks.yaml). Read from
# kube-apiserver's audit log, where each webhook call leaves the decision
# the webhook annotated.
# reviewed POD USER-FILTER: per update of POD, the validating webhook's
# decision annotations ("-" for none), in order.
reviewed() {
    jq -r --arg ns "$NSQ" --arg pod "$1" "select(.stage == \"ResponseComplete\" and .objectRef.namespace == \$ns
        and .objectRef.name == \$pod and .objectRef.resource == \"pods\" and .verb == \"patch\" and ($2))
        | .annotations[\"validate-update.gpuquota.io/decision\"] // \"-\"" "$E2E/cluster/audit.log" | paste -sd' '
}
ctl_user='.user.username == "system:serviceaccount:'$NS_SYS':gpuquota-controller"'
check "a user's update of the gate is reviewed by the validating webhook" denied \
    "$(reviewed low-new "($ctl_user | not)")"
check "the controller's ungate is not sent to it" "-" "$(reviewed first "$ctl_user and .responseStatus.code == 200")"

# ---------------------------------------------- priority, then age, in turn
order=()
for next in high low-old low-new; do
    t0=$(date +%s%3N)
    if [[ ${#order[@]} -eq 0 ]]; then gone first; else gone "${order[-1]}"; fi
    if eventually 10 ungated "$next"; then
        t1=$(date +%s%3N)
        order+=("$next")
        echo "# $next ungated $((t1 - t0)) ms after the pod before it was deleted"
    else
        fail "$next was not ungated"
        break
    fi
    for other in high low-old low-new; do
        [[ " ${order[*]} " == *" $other "* ]] && continue
        check "$other still waits while $next runs" "gpuquota.io/quota" "$(gates "$other")"
    done
    eventually 20 scheduled "$next"
    check_match "kube-scheduler places $next once ungated" "." "$(node_of "$next")"
done
check "queued pods start in priority-then-age order" "high low-old low-new" "${order[*]}"
# Each end frees room the next pod takes: the reconcile hands the lower
# usage to the admission pass, which writes it with that pod's charge
# (docs/controller.md). writes_to_ungate: per pod deleted in NSQ, the
# controller's status writes of its quotas between the DELETE and the next
# ungate, from the audit log. Before the hand-over every end made 2 (the
# reconcile's, then the pass's); a hand-over the pass did not take up in
# time is written by the reconcile, so only one 1 is required.
writes_to_ungate() {
    jq -r --arg ns "$NSQ" "select(.stage == \"ResponseComplete\" and .objectRef.namespace == \$ns
        and .responseStatus.code < 300 and ((.objectRef.resource == \"pods\" and (.verb == \"delete\"
        or (.verb == \"patch\" and $ctl_user))) or (.objectRef.resource == \"gpuquotas\"
        and .objectRef.subresource == \"status\" and $ctl_user)))
        | [.stageTimestamp, .objectRef.resource, .verb] | @tsv" "$E2E/cluster/audit.log" | sort |
        awk -F'\t' '$2 == "pods" && $3 == "delete" {n = 0; on = 1; next}
            on && $2 == "gpuquotas" {n++; next}
            on && $3 == "patch" {printf "%s%d", sep, n; sep = " "; on = 0}'
}
ends=$(writes_to_ungate)
echo "# status writes from each end to the next ungate: $ends"
check_match "a pod's end and the next pod's charge go in one status write" '(^| )1( |$)' "$ends"
drained() { [[ $(status_of '.status.queuedPods') == 0 ]]; }
eventually 15 drained
check "the queue is empty, one pod runs" '{"used":"8Gi","pods":0}' \
    "$(status_of '{used: .status.used["gpu-memory"], pods: .status.queuedPods}')"

# ------------------------------------------------------------- metrics
metrics=$(curl -fsS "http://127.0.0.1:$(ctl_port "$(leader)")/metrics")
check "the queue length gauge is back to 0" "0" \
    "$(awk -v m="gpuquota_queue_length{namespace=\"$NSQ\",quota=\"team\"}" '$1 == m {print $2}' <<<"$metrics")"
check "the wait-time histogram counts the 4 ungated pods, each once" "4" \
    "$(awk -v m="gpuquota_queue_wait_seconds_count{namespace=\"$NSQ\",quota=\"team\"}" '$1 == m {print $2}' <<<"$metrics")"

# ------------------------------------- spec.nodeName: charged as under Deny
check_match "a pod naming its node cannot be gated, so it is denied when it does not fit" \
    'denied the request: exceeded quota: team, requested: gpu-memory=8Gi, used: gpu-memory=8Gi, limited: gpu-memory=8Gi' \
    "$(qpod pinned e2e-queue-low | sed 's/^spec:/spec:\n  nodeName: gpu-l4-0/' | kubectl -n "$NSQ" create -f - 2>&1)"
finish
