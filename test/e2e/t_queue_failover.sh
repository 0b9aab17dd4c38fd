#!/usr/bin/env bash
# The queue under churn on the real control plane (docs/queueing.md):
#   1. queued pods deleted, the leading controller killed (SIGKILL) while
#      pods are being admitted, the other replica taking over: every pod
#      ends up admitted, none is ungated twice (kube-apiserver's audit log
#      counts the controller's successful pod patches) and the pods running
#      never exceed hard (sampled throughout from the pods themselves);
#   2. three webhook replicas charging pods of a Deny tenant quota while the
#      controller admits queued pods that the same tenant and a Queue quota
#      govern: neither quota is ever passed.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
NSF=e2e-queue-ha NSX=e2e-queue-rx NSY=e2e-queue-ry
MON=$(mktemp -d)
cleanup() {
    [[ -n ${monpid:-} ]] && kill "$monpid" 2>/dev/null
    local n pid
    for n in 0 1; do
        pid=$(cat "$E2E/controller-$n.pid" 2>/dev/null)
        [[ -n $pid ]] && pid_alive "$pid" || controller_start "$n"
    done
    kubectl delete namespace $NSF $NSX $NSY --wait=false >/dev/null 2>&1
    kubectl delete gputenantquota e2e-queue-race --ignore-not-found >/dev/null 2>&1
    rm -rf "$MON"
}
trap cleanup EXIT

mk() { gpu_pod "$2" "$3" | kubectl -n "$1" create -f - >/dev/null 2>&1; }
gated_count() {
    kubectl -n "$1" get pods -o json | jq '[.items[] | select(.spec.schedulingGates)] | length'
}
# running_gi NS...: GiB charged by the ungated pods of the namespaces.
running_gi() {
    local n
    for n in "$@"; do kubectl -n "$n" get pods -o json; done | jq -s '[.[].items[] |
        select((.spec.schedulingGates | not) and .metadata.deletionTimestamp == null) |
        .spec.containers[0].resources.limits["aliyun.com/gpu-mem"] | tonumber] | add // 0'
}
# monitor FILE LIMIT NS...: sample what runs every 0.2 s; a sample above
# LIMIT is written to FILE, and every sample taken counts in FILE.samples (a
# monitor that could not read would otherwise pass in silence).
monitor() {
    local file=$1 limit=$2 v
    shift 2
    while :; do
        if v=$(running_gi "$@"); then
            echo . >>"$file.samples"
            ((v > limit)) && echo "$(date +%T.%N) $* running ${v}Gi > ${limit}Gi" >>"$file"
        fi
        sleep 0.2
    done
}
# samples FILE: how many samples the monitor of FILE took.
samples() { wc -l <"$1.samples" 2>/dev/null || echo 0; }

# ------------------------------------------------- failover mid-queue
since=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ) # kube-apiserver's audit timestamps
ns "$NSF"
quota "$NSF" team '{gpu-memory: 16Gi}'
kubectl -n "$NSF" patch gq team --type=merge -p '{"spec":{"whenExceeded":"Queue"}}' >/dev/null
seen() { gpu_pod probe 1Gi | kubectl -n "$1" create --dry-run=server -o json -f - | jq -e '.spec.schedulingGates'; }
eventually 15 seen "$NSF"
for i in 0 1 2 3; do mk "$NSF" run-$i 4Gi; done
all_ungated() { [[ $(gated_count "$1") == 0 ]]; }
eventually 15 all_ungated "$NSF"
for i in $(seq -w 0 13); do mk "$NSF" q-$i 4Gi; done
check "14 pods queue behind the full quota" "14" "$(gated_count "$NSF")"
monitor "$MON/failover" 16 "$NSF" &
monpid=$!
kubectl -n "$NSF" delete pod q-03 q-07 q-11 --grace-period=0 --force >/dev/null 2>&1
check "deleted queued pods leave the queue" "11" "$(gated_count "$NSF")"
l=$(leader)
check_match "one controller leads" "^[01]$" "$l"
# Free room and kill the leader in the same breath: the admission it may
# have begun is finished by the other replica from the API's state.
kubectl -n "$NSF" delete pod run-0 run-1 --grace-period=0 --force >/dev/null 2>&1
controller_stop "$l" KILL
other=$((1 - l))
took_over() { [[ $(leader) == "$other" ]]; }
eventually 40 took_over
check "the other controller takes the Lease" "$other" "$(leader)"
# Drain the queue two by two as pods end.
remaining() { gated_count "$NSF"; }
for round in $(seq 8); do
    ((round > 1)) || eventually 20 bash -c "[[ \$(kubectl -n $NSF get pods -o json | jq '[.items[] | select(.spec.schedulingGates)] | length') -le 9 ]]"
    left=$(remaining)
    ((left == 0)) && break
    victims=$(kubectl -n "$NSF" get pods -o json | jq -r '[.items[] | select(.spec.schedulingGates | not) | .metadata.name][0:2] | join(" ")')
    # shellcheck disable=SC2086
    kubectl -n "$NSF" delete pod $victims --grace-period=0 --force >/dev/null 2>&1
    fewer() { (($(remaining) < left)); }
    eventually 20 fewer || { fail "the queue stopped draining at $left"; break; }
done
eventually 20 all_ungated "$NSF"
check "every queued pod was admitted in the end" "0" "$(gated_count "$NSF")"
controller_start "$l"
kill "$monpid" 2>/dev/null
wait "$monpid" 2>/dev/null
monpid=
check "pods running never exceeded hard (sampled every 0.2 s)" "" "$(cat "$MON/failover" 2>/dev/null)"
n=$(samples "$MON/failover")
((n >= 5)) && pass "the failover monitor took $n samples" || fail "the failover monitor took $n samples"
# kube-apiserver's audit log: the controller's successful patches per pod.
sa=system:serviceaccount:$NS_SYS:gpuquota-controller
twice=$(jq -r --arg ns "$NSF" --arg sa "$sa" --arg t "$since" 'select(.stage == "ResponseComplete" and .verb == "patch" and .requestReceivedTimestamp >= $t
        and .objectRef.resource == "pods" and .objectRef.namespace == $ns and .user.username == $sa
        and .responseStatus.code == 200) | .objectRef.name' "$E2E/cluster/audit.log" | sort | uniq -d)
ungates=$(jq -r --arg ns "$NSF" --arg sa "$sa" --arg t "$since" 'select(.stage == "ResponseComplete" and .verb == "patch" and .requestReceivedTimestamp >= $t
        and .objectRef.resource == "pods" and .objectRef.namespace == $ns and .user.username == $sa
        and .responseStatus.code == 200) | .objectRef.name' "$E2E/cluster/audit.log" | sort -u | wc -l)
check "no pod was ungated twice" "" "$twice"
check "every pod was ungated once (4 first ones + 11 queued)" "15" "$ungates"

# -------------------------------- webhook replicas racing the controller
ns "$NSX" e2e-queue-race=yes
ns "$NSY" e2e-queue-race=yes
kubectl apply -f - >/dev/null <<EOF
apiVersion: gpuquota.io/v1alpha1
kind: GPUTenantQuota
metadata: {name: e2e-queue-race}
spec:
  namespaceSelector: {matchLabels: {e2e-queue-race: "yes"}}
  hard: {gpu-memory: 40Gi}
EOF
quota "$NSX" team '{gpu-memory: 24Gi}' 'whenExceeded: Queue'
eventually 15 seen "$NSX"
tenant_seen() { denied_with 'tenant quota' "$NSY" "$(gpu_pod probe 41Gi)"; }
eventually 15 tenant_seen
monitor "$MON/race-tenant" 40 "$NSX" "$NSY" &
monpid=$!
monitor "$MON/race-x" 24 "$NSX" &
monpid2=$!
# 12 queued pods in X (the controller charges X's quota and the tenant)
# and 12 plain pods in Y (the three webhooks charge the tenant), at once.
makers=()
for i in $(seq -w 0 11); do
    mk "$NSX" x-$i 4Gi &
    makers+=($!)
    mk "$NSY" y-$i 4Gi &
    makers+=($!)
done
wait "${makers[@]}"
settled() { [[ $(kubectl get gtq e2e-queue-race -o json | jq '.status.reservations // [] | length') == 0 ]]; }
eventually 30 settled
sleep 2
x_run=$(running_gi "$NSX") all_run=$(running_gi "$NSX" "$NSY")
echo "# after the race: X runs ${x_run}Gi, X+Y run ${all_run}Gi, $(gated_count "$NSX") X pods queued"
((x_run <= 24)) && pass "the Queue quota is not passed ($x_run <= 24)" || fail "X passed: $x_run"
((all_run <= 40)) && pass "the tenant is not passed ($all_run <= 40)" || fail "tenant passed: $all_run"
# Free the tenant: queued pods of X start, still within both quotas.
x_pods=$(kubectl -n "$NSX" get pods --no-headers | wc -l)
want=$((x_pods * 4 < 24 ? x_pods * 4 : 24))
kubectl -n "$NSY" delete pods --all --grace-period=0 --force >/dev/null 2>&1
x_full() { [[ $(running_gi "$NSX") == "$want" ]]; }
eventually 20 x_full
check "X's queue fills X's quota once the tenant has room" "$want" "$(running_gi "$NSX")"
kill "$monpid" "$monpid2" 2>/dev/null
wait "$monpid" "$monpid2" 2>/dev/null
monpid=
check "neither quota was passed at any sample" "" "$(cat "$MON"/race-tenant "$MON"/race-x 2>/dev/null)"
for m in race-tenant race-x; do
    n=$(samples "$MON/$m")
    ((n >= 5)) && pass "the $m monitor took $n samples" || fail "the $m monitor took $n samples"
done
finish
