#!/usr/bin/env bash
# Two members of one pod group that disagree on its size, created in the same
# instant by a tenant with the edit role (docs/queueing.md, "Pod groups"):
# /validate compares a new member with the members it can list, and the LIST
# is not a lock, so both may get in. Here both creates wait together at the
# paused webhook replicas and are decided at once. Whatever gets in, nothing
# of the group is admitted while its members disagree: the controller holds
# them with an Event saying so, charges nothing, and releases the group once
# the odd member is deleted and the group is complete.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

NS=e2e-group-race
resume() {
    local f
    for f in "$E2E"/webhook-*.pid; do kill -CONT "$(cat "$f")" 2>/dev/null; done
    return 0
}
cleanup() {
    resume
    kubectl delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1
    rm -f "$TKC" "$TKC".a "$TKC".b
}
TKC=$(mktemp)
trap cleanup EXIT

ns "$NS" || { fail "namespace $NS"; finish; }
tenant_kubeconfig "$NS" tenant "$TKC" || { fail "tenant kubeconfig"; finish; }
tk() { kubectl --kubeconfig "$TKC" -n "$NS" "$@"; }
quota "$NS" team '{gpu-memory: 64Gi}' 'whenExceeded: Queue'
seen() { gpu_pod probe 1Gi | kubectl -n "$NS" create --dry-run=server -o json -f - | jq -e '.spec.schedulingGates'; }
eventually 15 seen || fail "the webhooks never saw the Queue quota"

member() { # NAME GROUP SIZE
    gpu_pod "$1" 8Gi "  labels: {gpuquota.io/pod-group: $2}
  annotations: {gpuquota.io/pod-group-size: \"$3\"}" | tk create -f - 2>&1
}
gates() { tk get pod "$1" -o jsonpath='{.spec.schedulingGates[*].name}' 2>/dev/null; }
exists() { tk get pod "$1" -o name >/dev/null 2>&1; }
ev() {
    kubectl -n "$NS" get events --field-selector "involvedObject.name=$1,reason=Queued" \
        -o jsonpath='{.items[*].message}' 2>/dev/null
}
says() { [[ $(ev "$1") =~ $2 ]]; }

group=
for attempt in $(seq 10); do
    g=race$attempt
    for f in "$E2E"/webhook-*.pid; do kill -STOP "$(cat "$f")"; done
    member "$g-a" "$g" 2 >"$TKC.a" &
    pa=$!
    member "$g-b" "$g" 3 >"$TKC.b" &
    pb=$!
    sleep 1.5 # both creates wait at the paused webhooks
    resume
    wait "$pa" "$pb"
    if exists "$g-a" && exists "$g-b"; then
        group=$g
        break
    fi
    check_match "attempt $attempt: the member decided second is refused, naming the other" \
        "members of a group must agree on its size" "$(cat "$TKC.a" "$TKC.b")"
done

if [[ -z $group ]]; then
    pass "no two disagreeing members got in together in 10 attempts (each time one was refused)"
    finish
fi
pass "two members disagreeing on the size got in together (attempt $attempt)"
eventually 30 says "$group-a" "members disagree" || true
check_match "the controller holds the first, saying why" \
    "pod group $NS/$group: members disagree on annotation gpuquota.io/pod-group-size; none is admitted until they agree" \
    "$(ev "$group-a")"
eventually 30 says "$group-b" "members disagree" || true
check_match "and the second" "members disagree" "$(ev "$group-b")"
check "neither is ungated" "gpuquota.io/quota gpuquota.io/quota" \
    "$(gates "$group-a") $(gates "$group-b")"
check "nothing is charged" "" "$(used "$NS" team gpu-memory | sed 's/^0$//')"
check_match "the tenant deletes the odd member" "deleted" "$(tk delete pod "$group-b" 2>&1)"
check_match "and completes the group of 2" "created" "$(member "$group-c" "$group" 2)"
ungated() { [[ -z $(gates "$1") ]]; }
eventually 30 ungated "$group-a" || true
eventually 30 ungated "$group-c" || true
check "the group is admitted whole" "/" "$(gates "$group-a")/$(gates "$group-c")"
EXPECT=16Gi
is_used() { [[ $(used "$NS" team gpu-memory) == "$EXPECT" ]]; }
eventually 30 is_used || true
check "charged for its two members" "16Gi" "$(used "$NS" team gpu-memory)"
finish
