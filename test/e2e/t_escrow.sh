#!/usr/bin/env bash
# Escrow (docs/validating-webhook.md, "Escrow") through kube-apiserver, with
# three webhook replicas run with --escrow-pods 16 and a 20 s reservation TTL:
#   1. 200 concurrent creates (32 kubectl processes at a time) against a
#      GPUQuota that fits 40 of them: exactly 40 pods exist, the other 160
#      were denied with the exceeded-quota message (used never above hard),
#      some admissions took no status write of their own, and once the
#      replicas are idle every hold is given back and the controller leaves
#      no reservation;
#   2. the tenant (edit rights) cannot touch a hold: status is not theirs;
#   3. every replica killed -9 right after taking a hold: the dead hold stays
#      counted (nothing past hard), the new replicas admit only the room left
#      beside it, and its room comes back when it expires, not before.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
since=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ) # this run's records in kube-apiserver's audit log

NS=e2e-escrow NS2=e2e-escrow-dead
N=200 FIT=40 PAR=32
ARGS=(--escrow-pods 16 --reservation-ttl 20s)
scratch "$NS"
# shellcheck disable=SC2064 # expanded now, on purpose
trap "rm -rf '$work'; kubectl delete namespace '$NS' '$NS2' --ignore-not-found --wait=true --timeout=120s >/dev/null" EXIT
now_ms() { date +%s%3N; }
# escrow_events N EVENT: gpuquota_escrow_events_total{event=EVENT} of replica N.
escrow_events() { wh_metric "$1" "gpuquota_escrow_events_total{event=\"$2\"}"; }
# holds NS NAME: the keys of the holds in GPUQuota NS/NAME's status.
holds() {
    kubectl -n "$1" get gpuquota "$2" -o json |
        jq -r '[.status.reservations[]? | select(.escrow == "hold") | .key] | sort | join(" ")'
}
no_reservations() { [[ $(reservations "$NS" "$1") == 0 ]]; }
# webhook_writes: GPUQuota status updates by the webhooks' account since the start.
webhook_writes() {
    jq -r --arg ns "$NS" --arg since "$since" 'select(.verb == "update"
            and .objectRef.resource == "gpuquotas" and .objectRef.subresource == "status"
            and .objectRef.namespace == $ns and .requestReceivedTimestamp >= $since
            and .stage == "ResponseComplete" and .responseStatus.code == 200
            and (.user.username | endswith(":gpuquota-webhook")))
        | .auditID' "$E2E/cluster/audit.log" | sort -u | grep -c . || true
}

ns "$NS" || { fail "namespace $NS"; finish; }
webhooks 3 "${ARGS[@]}" || { fail "three replicas with escrow"; finish; }

# ---- 1. 200 creates, 40 fit ----------------------------------------------
quota "$NS" esc '{gpu-memory: 40Gi, gpu-pods: 100}'
for ((i = 0; i < N; i++)); do gpu_pod "$(printf 'e-%03d' "$i")" 1Gi >"$work/$(printf 'e-%03d' "$i").yaml"; done
t0=$(now_ms)
create_parallel "$NS" "$PAR" "$work"/e-*.yaml
echo "# $N creates, $PAR at a time, in $(($(now_ms) - t0)) ms"
tally '^Error from server \(Forbidden\): error when creating ".*": admission webhook "validate\.gpuquota\.io" denied the request: exceeded quota: esc, requested: gpu-memory=1Gi, used: gpu-memory=40Gi, limited: gpu-memory=40Gi$' \
    "$work"/e-*.yaml
check "kubectl create succeeded" "$FIT" "$created"
check "kubectl create denied with the exceeded-quota message (used: 40Gi)" $((N - FIT)) "$denied"
check "kubectl create failed otherwise" 0 "$other"
pods=$(kubectl -n "$NS" get pods -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort)
check "pods that exist" "$FIT" "$(grep -c . <<<"$pods")"
check "the pods that exist are the ones admitted" "$(printf '%s\n' "${admitted[@]}" | sort)" "$pods"
on_hold=0 held=0 deferred=0
for n in 0 1 2; do
    on_hold=$((on_hold + $(escrow_events "$n" admitted)))
    held=$((held + $(escrow_events "$n" held)))
    deferred=$((deferred + $(escrow_events "$n" deferred)))
done
writes=$(webhook_writes)
echo "# $FIT admitted: $on_hold on a hold, $held holds taken, $writes status writes by the webhooks, $deferred denial steps put off"
((on_hold > 0)) && pass "admissions on a hold, with no write of their own" || fail "no admission on a hold"
((writes < FIT)) && pass "fewer webhook status writes ($writes) than admitted pods" ||
    fail "$writes webhook status writes for $FIT pods"
t0=$(now_ms)
eventually 60 no_reservations esc && echo "# holds, wants and records gone $(($(now_ms) - t0)) ms after the last create"
check "reservations left once idle" 0 "$(reservations "$NS" esc)"
check "status.used gpu-memory" 40Gi "$(used "$NS" esc gpu-memory)"
out=$(gpu_pod e-late 1Gi | kubectl -n "$NS" create -f - 2>&1)
check_match "one more pod is denied" 'exceeded quota: esc, requested: gpu-memory=1Gi, used: gpu-memory=40Gi, limited: gpu-memory=40Gi$' "$out"

# ---- 2. the tenant's view ----------------------------------------------------
# A namespace of its own: a GPUQuota counts every pod of its namespace.
ns "$NS2" || { fail "namespace $NS2"; finish; }
quota "$NS2" dead '{gpu-memory: 40Gi}'
gpu_pod d-0 4Gi | kubectl -n "$NS2" create -f - >/dev/null || fail "d-0 created"
held_now=$(holds "$NS2" dead)
[[ -n $held_now ]] && pass "a replica holds room of quota dead ($held_now)" || fail "no hold after d-0"
tenant_kubeconfig "$NS2" dev "$work/dev.kubeconfig" || fail "tenant account"
out=$(KUBECONFIG=$work/dev.kubeconfig kubectl -n "$NS2" patch gpuquota dead --subresource=status \
    --type=json -p '[{"op":"remove","path":"/status/reservations"}]' 2>&1)
check_match "the tenant cannot remove a hold" 'forbidden' "$out"

# ---- 3. replicas killed -9 holding room -----------------------------------------
# d-0 took 4Gi and a hold of a quarter of the rest (8Gi, 2 pods): kill every replica
# before it is given back (5 s idle), then start three new ones.
for n in 0 1 2; do webhook_stop "$n" KILL; done
dead=$(holds "$NS2" dead)
[[ -n $dead ]] && pass "the dead replicas' hold is still counted ($dead)" || fail "the hold went with its replica"
webhooks 3 "${ARGS[@]}" || { fail "three new replicas"; finish; }
t_kill=$(now_ms)
# 40 - 4 (d-0) - 8 (the dead hold) = 28Gi: seven 4Gi pods, not eight.
ok=0
for i in 1 2 3 4 5 6 7; do gpu_pod "d-$i" 4Gi | kubectl -n "$NS2" create -f - >/dev/null 2>&1 && ok=$((ok + 1)); done
check "pods admitted beside the dead hold" 7 "$ok"
out=$(gpu_pod d-8 4Gi | kubectl -n "$NS2" create -f - 2>&1)
check_match "the room the dead hold keeps is not given" 'exceeded quota: dead, requested: gpu-memory=4Gi, used: gpu-memory=40Gi, limited: gpu-memory=40Gi$' "$out"
dead_gone() { [[ " $(holds "$NS2" dead) " != *" $dead "* ]]; }
eventually 60 dead_gone && echo "# the dead hold went $(($(now_ms) - t_kill)) ms after the new replicas started"
dead_gone && pass "the dead hold expired" || fail "the dead hold is still there"
ok=0
for i in 8 9; do gpu_pod "d-$i" 4Gi | kubectl -n "$NS2" create -f - >/dev/null 2>&1 && ok=$((ok + 1)); done
check "its room admits two more pods" 2 "$ok"
out=$(gpu_pod d-10 4Gi | kubectl -n "$NS2" create -f - 2>&1)
check_match "and no fifth" 'exceeded quota: dead, requested: gpu-memory=4Gi, used: gpu-memory=40Gi, limited: gpu-memory=40Gi$' "$out"
check "pods of quota dead" 10 "$(kubectl -n "$NS2" get pods -o name | grep -c '/d-')"

webhooks 3 || fail "replicas back as the suite runs them"
finish
