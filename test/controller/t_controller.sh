#!/usr/bin/env bash
# gpuquota controller against the kube-apiserver stand-in: status follows pods,
# tenants follow namespace labels, Exceeded raises an Event, faults converge,
# reservations expire, and two replicas elect exactly one leader.
# Needs STANDIN_BIN, DATA (standin test data), GQ_BIN, CRDS (deploy/crds).
. "$(dirname "$0")/../standin/tests/lib.sh"
# shellcheck source=../manifests.sh
. "$(dirname "$0")/../manifests.sh"
GQ_BIN=${GQ_BIN:?path to gpuquota}
CRDS=${CRDS:?deploy/crds directory}
standin_start

CPIDS=()
cleanup_ctl() {
    for p in "${CPIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    cleanup
}
trap cleanup_ctl EXIT

fault() { curl -s -o /dev/null -X POST -H 'Content-Type: application/json' --data-binary "$1" "$S/standin/faults"; }
now_ms() { date +%s%3N; }

# start_ctl NAME [args]: run a controller logging to $TMP/NAME.log; sets CPID and MPORT.
start_ctl() {
    local name=$1
    shift
    "$GQ_BIN" controller --kubeconfig "$KUBECONFIG" --metrics-listen 127.0.0.1:0 "$@" \
        >"$TMP/$name.log" 2>&1 &
    CPID=$!
    CPIDS+=("$CPID")
    MPORT=""
    for _ in $(seq 100); do
        MPORT=$(sed -n 's/.*metrics listening on port \([0-9]*\).*/\1/p' "$TMP/$name.log")
        [ -n "$MPORT" ] && break
        sleep 0.05
    done
    [ -n "$MPORT" ] || { fail "controller $name did not start"; cat "$TMP/$name.log"; }
}

# stop_ctl PID NAME: SIGTERM, expect exit 0 and no sanitizer report.
stop_ctl() {
    kill -TERM "$1"
    wait "$1"
    expect_eq "$2 exits cleanly on SIGTERM" 0 "$?"
    if grep -qE 'Sanitizer|runtime error' "$TMP/$2.log"; then
        fail "$2: sanitizer report"
        cat "$TMP/$2.log"
    fi
}

metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {print $2}'; }

# wait_for NAME TIMEOUT_S EXPECTED CMD...: poll CMD until it prints EXPECTED.
wait_for() {
    local name=$1 timeout=$2 want=$3
    shift 3
    local start got
    start=$(now_ms)
    while :; do
        got=$("$@" 2>/dev/null)
        [ "$got" == "$want" ] && break
        if [ $(($(now_ms) - start)) -gt $((timeout * 1000)) ]; then
            fail "$name (after ${timeout}s)"$'\n  expected: '"$want"$'\n  actual:   '"$got"
            return 1
        fi
        sleep 0.02
    done
    pass
    echo "ok: $name ($(($(now_ms) - start)) ms)"
}

GQ=/apis/gpuquota.io/v1alpha1
used() { # used NS NAME KEY
    curl -s "$S$GQ/namespaces/$1/gpuquotas/$2" | jq -r ".status.used.\"$3\" // \"-\""
}
tused() { curl -s "$S$GQ/gputenantquotas/$1" | jq -r ".status.used.\"$2\" // \"-\""; }
tns() { curl -s "$S$GQ/gputenantquotas/$1" | jq -c '[.status.namespaces[]?.namespace]'; }
cond() { curl -s "$S$GQ/namespaces/$1/gpuquotas/$2" | jq -r ".status.conditions[]? | select(.type==\"$3\") | .status"; }

# pod NS NAME MEM [extra metadata JSON fields]
pod() {
    local extra=${4:-}
    req POST "/api/v1/namespaces/$1/pods" "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"$2\",\"namespace\":\"$1\"$extra},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"resources\":{\"limits\":{\"gpuquota.io/gpu-memory\":\"$3\"}}}]}}"
    [ "$CODE" == 201 ] || fail "create pod $1/$2: $CODE $BODY"
}
delpod() { req DELETE "/api/v1/namespaces/$1/pods/$2"; }

kubectl apply -f "$CRDS" >/dev/null || fail "apply CRDs"
for ns in ml-a ml-b web gpuquota-system; do kubectl create namespace $ns >/dev/null; done
kubectl label namespace ml-a team=ml >/dev/null
kubectl label namespace ml-b team=ml >/dev/null
kubectl label namespace web team=web >/dev/null
{
    printf 'apiVersion: gpuquota.io/v1alpha1\nkind: GPUQuota\nmetadata: {name: q, namespace: ml-a}\n'
    printf 'spec:\n  hard: {gpu-memory: 64Gi, gpu-pods: 10}\n---\n'
    tenant_quota_yaml ml '{team: ml}' '{gpu-memory: 256Gi}'
    echo ---
    tenant_quota_yaml web '{team: web}' '{gpu-memory: 256Gi}'
} | kubectl apply -f - >/dev/null || fail "apply quotas"

# Pods that exist before the controller starts are counted (no gpuquota label).
pod ml-a pre 8Gi
pod ml-b pre-b 2Gi
req POST /api/v1/namespaces/ml-a/pods '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"cpu-only"},"spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":"1"}}}]}}'
pod ml-a invalid -1Gi # a negative request cannot be priced: logged and not counted
start_ctl c1 --workers 2 --reservation-grace 2s
C1=$CPID M1=$MPORT
mem_pods() { echo "$(used ml-a q gpu-memory) $(used ml-a q gpu-pods)"; }
wait_for "pre-existing pods counted" 10 "8Gi 1" mem_pods
wait_for "tenant counts both namespaces" 2 "10Gi" tused ml gpu-memory
wait_for "tenant breakdown" 2 '["ml-a","ml-b"]' tns ml
expect_eq "Ready condition" "True" "$(cond ml-a q Ready)"
expect_eq "tracked pods (CPU-only and invalid ones are not kept)" "2" "$(metric $M1 gpuquota_controller_tracked_pods)"
expect_eq "pod that cannot be priced is counted as an error" "1" "$(metric $M1 gpuquota_controller_pod_cost_errors_total)"
expect_eq "not Exceeded" "False" "$(cond ml-a q Exceeded)"

# Pods created and deleted: status within a second.
pod ml-a p1 4Gi
wait_for "pod created -> used" 1 "12Gi" used ml-a q gpu-memory
delpod ml-a p1
wait_for "pod deleted -> used" 1 "8Gi" used ml-a q gpu-memory

# A pod turning Succeeded frees its charge.
req PATCH /api/v1/namespaces/ml-a/pods/pre/status '{"status":{"phase":"Succeeded"}}' application/merge-patch+json
wait_for "Succeeded frees the charge" 1 "0" used ml-a q gpu-memory
wait_for "Succeeded: gpu-pods too" 1 "0" used ml-a q gpu-pods

# A namespace label change moves usage between tenants.
kubectl label namespace ml-b team=web --overwrite >/dev/null
wait_for "label change: leaves ml" 2 "0" tused ml gpu-memory
wait_for "label change: joins web" 2 "2Gi" tused web gpu-memory
wait_for "web breakdown" 2 '["ml-b"]' tns web

# Lowering hard: Exceeded condition and an Event.
pod ml-a big 40Gi
wait_for "big pod counted" 1 "40Gi" used ml-a q gpu-memory
kubectl patch gq q -n ml-a --type merge -p '{"spec":{"hard":{"gpu-memory":"32Gi"}}}' >/dev/null
wait_for "Exceeded after lowering hard" 2 "True" cond ml-a q Exceeded
MSG=$(curl -s "$S$GQ/namespaces/ml-a/gpuquotas/q" | jq -r '.status.conditions[] | select(.type=="Exceeded") | .message')
expect_eq "Exceeded message names the key" "used exceeds hard for gpu-memory (used 40Gi, hard 32Gi)" "$MSG"
EV=$(curl -s "$S/api/v1/namespaces/ml-a/events" | jq -c '[.items[] | select(.reason=="Exceeded") | {type, kind:.involvedObject.kind, name:.involvedObject.name, message}]')
expect_eq "one Exceeded event" '[{"type":"Warning","kind":"GPUQuota","name":"q","message":"used exceeds hard for gpu-memory (used 40Gi, hard 32Gi)"}]' "$EV"
kubectl patch gq q -n ml-a --type merge -p '{"spec":{"hard":{"gpu-memory":"64Gi"}}}' >/dev/null
wait_for "Exceeded cleared after raising hard" 2 "False" cond ml-a q Exceeded
expect_eq "observedGeneration follows spec" "3" "$(curl -s "$S$GQ/namespaces/ml-a/gpuquotas/q" | jq -r .status.observedGeneration)"

# An invalid spec is visible: Ready False with reason InvalidSpec and a
# message naming the key and the value, observedGeneration of the invalid
# spec, an Event; usage as last counted. Fixed, it is Ready again.
readyc() { # readyc PATH: status reason observedGeneration of the Ready condition, and the message
    curl -s "$S$GQ/$1" | jq -r '(.status.conditions[]? | select(.type=="Ready") | "\(.status) \(.reason) \(.observedGeneration)"), .status.observedGeneration'
}
kubectl patch gq q -n ml-a --type merge -p '{"spec":{"hard":{"gpu-memory":"lots"}}}' >/dev/null
wait_for "invalid quota: Ready False, InvalidSpec" 2 "False InvalidSpec 4
4" readyc namespaces/ml-a/gpuquotas/q
Q=$(curl -s "$S$GQ/namespaces/ml-a/gpuquotas/q")
expect_match "the message names the key and the value" '^spec\.hard\.gpu-memory: invalid quantity "lots"' \
    "$(printf '%s' "$Q" | jq -r '.status.conditions[] | select(.type=="Ready") | .message')"
expect_eq "usage as last counted" "40Gi" "$(printf '%s' "$Q" | jq -r '.status.used."gpu-memory"')"
EV=$(curl -s "$S/api/v1/namespaces/ml-a/events" | jq -c '[.items[] | select(.reason=="InvalidSpec") | {type, kind:.involvedObject.kind, name:.involvedObject.name}]')
expect_eq "one InvalidSpec event" '[{"type":"Warning","kind":"GPUQuota","name":"q"}]' "$EV"
kubectl patch gq q -n ml-a --type merge -p '{"spec":{"hard":{"gpu-memory":null,"gpu-memroy":"64Gi"}}}' >/dev/null
wait_for "a misspelt key is named" 2 'spec.hard.gpu-memroy: unsupported key; supported: gpu-memory, gpu-pods, gpus' \
    bash -c "curl -s '$S$GQ/namespaces/ml-a/gpuquotas/q' | jq -r '.status.conditions[] | select(.type==\"Ready\") | .message'"
kubectl patch gq q -n ml-a --type merge -p '{"spec":{"hard":{"gpu-memroy":null,"gpu-memory":"64Gi"}}}' >/dev/null
wait_for "fixed: Ready again" 2 "True Reconciled 6
6" readyc namespaces/ml-a/gpuquotas/q
kubectl patch gtq web --type merge -p '{"spec":{"hard":{"gpu-memory":"-10Gi"}}}' >/dev/null
wait_for "invalid tenant: Ready False, InvalidSpec" 2 "False InvalidSpec 2
2" readyc gputenantquotas/web
expect_eq "the tenant's message names the key and the value" 'spec.hard.gpu-memory: invalid value "-10Gi": must be greater than or equal to 0' \
    "$(curl -s "$S$GQ/gputenantquotas/web" | jq -r '.status.conditions[] | select(.type=="Ready") | .message')"
expect_eq "the tenant's event goes to namespace default" 1 \
    "$(curl -s "$S/api/v1/namespaces/default/events" | jq '[.items[] | select(.reason=="InvalidSpec" and .involvedObject.name=="web")] | length')"
kubectl patch gtq web --type merge -p '{"spec":{"hard":{"gpu-memory":"256Gi"}}}' >/dev/null
wait_for "tenant fixed" 2 "True Reconciled 3
3" readyc gputenantquotas/web

# Reservations are matched to pods by uid (the key the validating webhook
# records); an annotation is no key. One whose pod is counted is dropped at
# once; one whose pod never appears (a phantom) is dropped once the grace
# period (--reservation-grace 2s here) has passed, long before it expires.
pod ml-a late 1Gi ',"annotations":{"gpuquota.io/reservation":"k-ann"}'
LATE_UID=$(curl -s "$S/api/v1/namespaces/ml-a/pods/late" | jq -r .metadata.uid)
wait_for "late pod counted" 1 "41Gi" used ml-a q gpu-memory
FAR=$(date -u -d '+10 minutes' +%Y-%m-%dT%H:%M:%SZ)
r1() { echo "{\"key\":\"$1\",\"namespace\":\"ml-a\",\"pod\":\"$2\",\"gpu-memory\":\"$3\",\"gpus\":\"0\",\"gpu-pods\":\"1\",\"expires\":\"$FAR\"}"; }
RES="{\"status\":{\"reservations\":[$(r1 never ghost 8Gi),$(r1 k-ann late 1Gi),$(r1 "$LATE_UID" late 1Gi)]}}"
req PATCH "$GQ/namespaces/ml-a/gpuquotas/q/status" "$RES" application/merge-patch+json
expect_eq "reservations written" 200 "$CODE"
WRITTEN=$(now_ms)
resk() { curl -s "$S$GQ/namespaces/ml-a/gpuquotas/q" | jq -c '[.status.reservations[]?.key]'; }
wait_for "reservation of a counted pod (same uid) dropped at once" 1 '["never","k-ann"]' resk
expect_eq "phantoms kept during the grace period" '["never","k-ann"]' "$(resk)"
wait_for "phantom reservations dropped after the grace period" 6 '[]' resk
GONE=$(($(now_ms) - WRITTEN))
expect_eq "not before the grace period (${GONE} ms)" 1 "$((GONE >= 1800))"
expect_eq "the counted pod is not charged twice" "41Gi" "$(used ml-a q gpu-memory)"
expect_eq "abandoned reservations counted" "2" "$(metric $M1 gpuquota_controller_reservations_abandoned_total)"

# Faults: watch cut, 410 on watch, 500 storms, 409 on status writes. The
# controller must converge to the right numbers.
watches() { curl -s "http://127.0.0.1:$M1/metrics" | awk '$1 ~ /^gpuquota_controller_watches_total/ {s+=$2} END {print s+0}'; }
W0=$(watches)
fault '{"watchGone":4}'
fault '{"cutWatchAfter":1}'
pod ml-a f1 1Gi
pod ml-a f2 1Gi
# The cut stream is seen: a watch is opened again before the cuts stop.
rewatched() { echo $(( $(watches) > W0 )); }
wait_for "a cut watch is reopened" 10 1 rewatched
fault '{"cutWatchAfter":0}'
pod ml-a f3 1Gi
fault '{"fail":{"count":6,"code":500,"pathPrefix":"/api/v1/pods"}}'
fault '{"fail":{"count":3,"code":500,"method":"PUT","pathPrefix":"/apis/gpuquota.io"}}'
pod ml-a f4 1Gi
delpod ml-a f1
fault '{"conflictStatus":4}'
pod ml-a f5 3Gi
# 40 (big) + 1 (late) + f2..f4 + 3: a total no intermediate state shows
wait_for "converges after watch cuts, 410s, 500s and 409s" 30 "47Gi" used ml-a q gpu-memory
wait_for "gpu-pods converge" 5 "6" used ml-a q gpu-pods
curl -s -X POST "$S/standin/reset" >/dev/null
expect_eq "watches were restarted" 1 "$(( $(curl -s "http://127.0.0.1:$M1/metrics" | awk '$1 ~ /^gpuquota_controller_watches_total/ {s+=$2} END {print s}') > 4 ))"
expect_eq "410 Gone caused relists" 1 "$(( $(curl -s "http://127.0.0.1:$M1/metrics" | awk '$1 ~ /^gpuquota_controller_relists_total/ {s+=$2} END {print s}') > 0 ))"
expect_eq "conflicts counted" 1 "$(( $(metric $M1 'gpuquota_controller_reconciles_total{result="conflict"}') > 0 ))"
pod ml-a after 1Gi
wait_for "still live after the faults" 1 "48Gi" used ml-a q gpu-memory

# Metrics: usage gauges per quota and key, and /healthz.
expect_eq "usage gauge" "$((48 * 1024 * 1024 * 1024))" "$(metric $M1 'gpuquota_quota_used{namespace="ml-a",quota="q",resource="gpu-memory"}')"
expect_eq "hard gauge" "10" "$(metric $M1 'gpuquota_quota_hard{namespace="ml-a",quota="q",resource="gpu-pods"}')"
expect_eq "healthz" "ok" "$(curl -s "http://127.0.0.1:$M1/healthz")"
expect_eq "readyz" "200" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$M1/readyz")"

echo "--- kubectl get gq,gtq -A"
kubectl get gq,gtq -A | tee "$TMP/get.txt"
expect_match "kubectl shows HARD and USED" 'ml-a +gpuquota.gpuquota.io/q +64Gi +48Gi' "$(cat "$TMP/get.txt")"
expect_match "kubectl shows tenants" 'gputenantquota.gpuquota.io/web +256Gi +2Gi' "$(cat "$TMP/get.txt")"
stop_ctl "$C1" c1

# Leader election: two replicas, exactly one reconciles; SIGKILL the leader
# and the other takes over once the Lease expires: 15 s after the last
# renewal, seen at the standby's next try, which comes every 2 s jittered by
# up to 1.2x (client-go's JitterFactor: up to 4.4 s), so up to 19.4 s after
# the kill, plus the time to start reconciling. 30 s leaves room for a busy
# machine; the measured takeover is printed.
start_ctl e1 --leader-elect
E1=$CPID EM1=$MPORT
start_ctl e2 --leader-elect
E2=$CPID EM2=$MPORT
leaders() { echo $(( $(metric $EM1 gpuquota_controller_leader) + $(metric $EM2 gpuquota_controller_leader) )); }
wait_for "exactly one leader" 10 "1" leaders
# Still one after the leader has renewed the Lease at least once.
LEASE_PATH=/apis/coordination.k8s.io/v1/namespaces/gpuquota-system/leases/gpuquota-controller
renewed_at() { curl -s "$S$LEASE_PATH" | jq -r .spec.renewTime; }
R0=$(renewed_at)
renewed() { [ "$(renewed_at)" != "$R0" ] && echo yes; }
wait_for "the leader renews the Lease" 10 yes renewed
expect_eq "still exactly one leader" "1" "$(leaders)"
if [ "$(metric $EM1 gpuquota_controller_leader)" == 1 ]; then
    LEAD=$E1 FOLLOW_PORT=$EM2 FOLLOW=$E2 FNAME=e2
else
    LEAD=$E2 FOLLOW_PORT=$EM1 FOLLOW=$E1 FNAME=e1
fi
HOLDER=$(curl -s "$S/apis/coordination.k8s.io/v1/namespaces/gpuquota-system/leases/gpuquota-controller" | jq -r .spec.holderIdentity)
expect_match "lease held" '_[0-9]+$' "$HOLDER"
pod ml-a l1 1Gi
wait_for "leader reconciles" 2 "49Gi" used ml-a q gpu-memory
kill -9 "$LEAD"
wait "$LEAD" 2>/dev/null
KILLED=$(now_ms)
wait_for "failover after SIGKILL" 30 "1" metric $FOLLOW_PORT gpuquota_controller_leader
echo "failover took $(($(now_ms) - KILLED)) ms"
pod ml-a l2 1Gi
wait_for "new leader reconciles" 2 "50Gi" used ml-a q gpu-memory
stop_ctl "$FOLLOW" "$FNAME"
HOLDER=$(curl -s "$S/apis/coordination.k8s.io/v1/namespaces/gpuquota-system/leases/gpuquota-controller" | jq -r .spec.holderIdentity)
expect_eq "lease released on SIGTERM" "" "$HOLDER"
CPIDS=()

finish
