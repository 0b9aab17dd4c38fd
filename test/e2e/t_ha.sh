#!/usr/bin/env bash
# High availability against the real control plane:
#   1. two controllers, exactly one leader on the Lease
#      gpuquota-system/gpuquota-controller (docs/controller.md);
#   2. SIGKILL of the leader: the other takes the Lease after it expires and
#      quota status keeps following pods;
#   3. kube-apiserver restarted (etcd keeps its data): webhooks and
#      controllers resume their watches, a GPUQuota created afterwards in a
#      fresh namespace is enforced and status follows pods created afterwards;
#   4. etcd compacted while every gpuquota process is frozen and changes are
#      made behind their backs, then kube-apiserver restarted: their watches
#      resume from a compacted resourceVersion, get 410, relist, and both
#      enforcement and status reflect what changed while they were away;
#      a quota created just after kube-apiserver comes back is enforced
#      at once, whatever the watches have seen by then;
#   5. a webhook replica whose watches are held down on purpose (a proxy that
#      answers every request but watches): quotas made after its watches went
#      down, beside one it knows and in a namespace with none, are enforced
#      from live reads, as DESIGN.md 4 promises ("enforced from spec.hard as
#      soon as it exists"). The restarts above cannot promise that the
#      watches are still down when the probes run; this can.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

NSA=e2e-ha-a NSB=e2e-ha-b NSC=e2e-ha-c NSD=e2e-ha-d NSE=e2e-ha-e NSF=e2e-ha-f
LEASE=gpuquota-controller

procs() { cat "$E2E"/webhook-*.pid "$E2E"/controller-*.pid 2>/dev/null; }

cleanup() {
    local n pid
    # Nothing may stay frozen, whatever failed.
    for pid in $(procs); do kill -CONT "$pid" 2>/dev/null; done
    for n in 0 1; do
        pid=$(cat "$E2E/controller-$n.pid" 2>/dev/null)
        [[ -n $pid ]] && pid_alive "$pid" || controller_start "$n"
    done
    for n in 0 1 2; do
        pid=$(cat "$E2E/webhook-$n.pid" 2>/dev/null)
        if ! [[ -n $pid ]] || ! pid_alive "$pid"; then
            webhooks 3
            break
        fi
    done
    rm -f "$E2E/hold-watches"
    [[ ! -f $E2E/webhook-3.pid ]] || webhook_stop 3
    rm -f "$E2E/webhook-3.pid" "$E2E/webhook-3.port"
    stop_pidfile "$E2E/aux-watch-proxy.pid" TERM 20
    kubectl delete namespace "$NSA" "$NSB" "$NSC" "$NSD" "$NSE" "$NSF" --ignore-not-found --wait=true --timeout=120s >/dev/null
}
trap cleanup EXIT

lease() { kubectl -n "$NS_SYS" get lease "$LEASE" -o "jsonpath={.spec.$1}"; }
# one_leader: exactly one controller holds the Lease and reconciles, the other does not.
one_leader() {
    local l
    l=$(leader)
    [[ $l == [01] ]] || return 1
    [[ $(ctl_metric "$l" gpuquota_controller_leader) == 1 ]] &&
        [[ $(ctl_metric $((1 - l)) gpuquota_controller_leader) == 0 ]]
}
used_is() { [[ $(used "$1" "$2" "$3") == "$4" ]]; }
no_reservations() { [[ $(reservations "$1" "$2") == 0 ]]; }
now_ms() { date +%s%3N; }
# compact_etcd: compact etcd to its current revision; prints the revision.
compact_etcd() { "$ROOT/scripts/local-cluster.sh" compact "$E2E/cluster"; }

create_pod() { # create_pod NS NAME MEMORY: prints kubectl's output, returns its status
    gpu_pod "$2" "$3" | kubectl -n "$1" create -f - 2>&1
}

# review N NS MEMORY: webhook replica N's /validate answer to a dry-run CREATE
# of a pod asking MEMORY in NS, sent straight to it: "allowed" or the denial.
review() {
    local port
    port=$(cat "$E2E/webhook-$1.port")
    jq -nc --arg ns "$2" --arg mem "$3" --arg uid "e2e-ha-$RANDOM$RANDOM" '{
        apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview",
        request: {uid: $uid, kind: {group: "", version: "v1", kind: "Pod"},
            resource: {group: "", version: "v1", resource: "pods"},
            namespace: $ns, name: "probe", operation: "CREATE", dryRun: true,
            userInfo: {username: "e2e"},
            object: {apiVersion: "v1", kind: "Pod", metadata: {name: "probe", namespace: $ns},
                spec: {containers: [{name: "main", image: "x",
                    resources: {limits: {"gpuquota.io/gpu-memory": $mem}}}]}}}}' |
        curl -fsS --cacert "$E2E/certs/ca.crt" \
            --cert "$E2E/cluster/pki/webhook-client.crt" --key "$E2E/cluster/pki/webhook-client.key" \
            --resolve "gpuquota-webhook.$NS_SYS.svc:$port:127.0.0.1" \
            -H 'Content-Type: application/json' --data-binary @- \
            "https://gpuquota-webhook.$NS_SYS.svc:$port/validate" |
        jq -r 'if .response.allowed then "allowed" else .response.status.message end'
}

exceeded() { # exceeded QUOTA MEMORY USED HARD: the exceeded-quota message, as an ERE
    echo "exceeded quota: $1, requested: gpu-memory=$2, used: gpu-memory=$3, limited: gpu-memory=$4\$"
}
# denied NAME QUOTA MEMORY USED HARD OUTPUT: kubectl's output is that denial by validate.gpuquota.io
denied() {
    check_match "$1" "admission webhook \"validate\\.gpuquota\\.io\" denied the request: $(exceeded "$2" "$3" "$4" "$5")" "$6"
}
# refused NAME QUOTA MEMORY USED HARD MESSAGE: a replica's own answer is exactly that denial
refused() { check_match "$1" "^$(exceeded "$2" "$3" "$4" "$5")" "$6"; }

# ---------------------------------------------------------------- leader
ns "$NSA" || { fail "namespace $NSA"; finish; }
quota "$NSA" team '{gpu-memory: 40Gi, gpu-pods: 10}'
out=$(create_pod "$NSA" a1 4Gi)
check "$NSA/a1 (4Gi) created" 0 $?
eventually 20 used_is "$NSA" team gpu-memory 4Gi
check "used after a1" 4Gi "$(used "$NSA" team gpu-memory)"

if eventually 30 one_leader; then
    pass "exactly one controller leads: $(lease holderIdentity) (controller $(leader))"
else
    fail "exactly one leader: holder [$(lease holderIdentity)], pids $(ctl_pid 0) $(ctl_pid 1), leader gauges [$(ctl_metric 0 gpuquota_controller_leader)] [$(ctl_metric 1 gpuquota_controller_leader)]"
fi
check "lease duration" 15 "$(lease leaseDurationSeconds)"
renew0=$(lease renewTime)
renewed() { [[ $(lease renewTime) != "$renew0" ]]; }
eventually 10 renewed && pass "the leader renews the Lease ($renew0 -> $(lease renewTime))" ||
    fail "the Lease was not renewed within 10 s (renewTime $renew0)"

# ---------------------------------------------------------------- failover
L=$(leader)
L=${L:-0}
F=$((1 - L))
transitions=$(lease leaseTransitions)
transitions=${transitions:-0}
t0=$(now_ms)
controller_stop "$L" KILL
holds() { [[ $(leader) == "$1" ]]; }
if eventually 40 holds "$F"; then
    pass "controller $F took the Lease $(($(now_ms) - t0)) ms after the leader's SIGKILL"
else
    fail "controller $F did not take the Lease (holder [$(lease holderIdentity)])"
fi
check "leaseTransitions counts the takeover" $((transitions + 1)) "$(lease leaseTransitions)"
metric_is() { [[ $(ctl_metric "$1" "$2") == "$3" ]]; }
eventually 10 metric_is "$F" gpuquota_controller_leader 1
check "the new leader reconciles (leader gauge)" 1 "$(ctl_metric "$F" gpuquota_controller_leader)"

out=$(create_pod "$NSA" a2 8Gi)
check "$NSA/a2 (8Gi) created after the failover" 0 $?
t0=$(now_ms)
if eventually 20 used_is "$NSA" team gpu-memory 12Gi; then
    pass "the new leader counted a2 in $(($(now_ms) - t0)) ms"
fi
check "used gpu-memory after failover" 12Gi "$(used "$NSA" team gpu-memory)"
check "used gpu-pods after failover" 2 "$(used "$NSA" team gpu-pods)"

nlog=$(grep -c 'metrics listening on port' "$E2E/controller-$L.log")
controller_start "$L"
restarted() { (($(grep -c 'metrics listening on port' "$E2E/controller-$L.log") > nlog)); }
eventually 20 restarted
eventually 30 curl -fsS "http://127.0.0.1:$(ctl_port "$L")/readyz"
check "restarted controller $L is ready (caches synced)" ok "$(curl -fsS "http://127.0.0.1:$(ctl_port "$L")/readyz")"
check "restarted controller $L follows" 0 "$(ctl_metric "$L" gpuquota_controller_leader)"
check "controller $F keeps the Lease" "$F" "$(leader)"
one_leader && pass "exactly one leader after the restart" || fail "exactly one leader after the restart"

# enforced_at_once NS WHEN REQUEST HARD: quota team of NS (HARD gpu-memory,
# nothing used), created WHEN at $tq, refuses a REQUEST pod at once: on every
# replica (dry run) and for a pod created through kube-apiserver.
enforced_at_once() {
    local ns=$1 when=$2 req=$3 hard=$4 n out
    for n in 0 1 2; do
        refused "$ns: replica $n enforces the quota created $when (dry run, $(($(now_ms) - tq)) ms after)" \
            team "$req" 0 "$hard" "$(review "$n" "$ns" "$req")"
    done
    out=$(create_pod "$ns" early "$req")
    denied "$ns: $req pod created just after the quota is denied ($(($(now_ms) - tq)) ms after)" \
        team "$req" 0 "$hard" "$out"
}

# ---------------------------------------------------------------- kube-apiserver restart
# The namespace is made before the restart (fresh: nothing in it), so that its
# quota can be created the moment kube-apiserver answers again.
ns "$NSB" || fail "namespace $NSB"
t0=$(now_ms)
"$ROOT/scripts/local-cluster.sh" restart-apiserver "$E2E/cluster" >/dev/null ||
    { fail "kube-apiserver restart"; finish; }
echo "# kube-apiserver restarted in $(($(now_ms) - t0)) ms"
quota "$NSB" team '{gpu-memory: 8Gi, gpu-pods: 10}'
tq=$(now_ms)
# A quota is enforced from spec.hard as soon as it exists (DESIGN.md 4),
# whatever the webhooks' watches have delivered by then (from their cache,
# or read live). The probes wait 300 ms: longer than a watch event takes to
# arrive on this machine, so a pod admitted here means a replica neither
# watched nor read. (Whether the watches were still reconnecting at that
# moment depends on the machine's load; section 5 holds them down.)
sleep 0.3
enforced_at_once "$NSB" "as kube-apiserver came back" 12Gi 8Gi
if kubectl -n "$NSB" get pod early >/dev/null 2>&1; then
    echo "# $NSB/early was admitted past the quota; deleting it"
    kubectl -n "$NSB" delete pod early --wait=true --timeout=60s >/dev/null
    eventually 45 used_is "$NSB" team gpu-memory 0
fi
# Once the watches are back every replica knows the quota.
all_refuse() {
    local n
    for n in 0 1 2; do [[ $(review "$n" "$NSB" 12Gi) == "exceeded quota: team,"* ]] || return 1; done
}
if eventually 30 all_refuse; then
    pass "every replica enforces the new quota $(($(now_ms) - tq)) ms after it was created"
else
    fail "a replica still admits 12Gi over the 8Gi quota 30 s after it was created"
fi
# Through kube-apiserver (a replica chosen per call) and straight to each replica.
for i in 1 2 3 4 5 6; do
    out=$(create_pod "$NSB" over-$i 12Gi)
    denied "$NSB: 12Gi pod over a quota made after the restart is denied (try $i)" team 12Gi 0 8Gi "$out"
done
for n in 0 1 2; do
    refused "$NSB: replica $n denies 12Gi (dry run)" team 12Gi 0 8Gi "$(review "$n" "$NSB" 12Gi)"
done
check "$NSB: no pod over the quota exists" "" "$(kubectl -n "$NSB" get pods -o name)"
out=$(create_pod "$NSB" b1 8Gi)
check "$NSB/b1 (8Gi, exactly the quota) created" 0 $?
out=$(create_pod "$NSA" a3 4Gi)
check "$NSA/a3 (4Gi) created after the restart" 0 $?
t0=$(now_ms)
eventually 45 used_is "$NSB" team gpu-memory 8Gi &&
    pass "status of $NSB followed b1 ($(($(now_ms) - t0)) ms after its create)"
check "$NSB used gpu-memory" 8Gi "$(used "$NSB" team gpu-memory)"
eventually 15 used_is "$NSA" team gpu-memory 16Gi
check "$NSA used gpu-memory after the restart" 16Gi "$(used "$NSA" team gpu-memory)"
check "$NSA used gpu-pods after the restart" 3 "$(used "$NSA" team gpu-pods)"
eventually 30 one_leader && pass "exactly one leader after the kube-apiserver restart" ||
    fail "exactly one leader after the kube-apiserver restart (holder [$(lease holderIdentity)])"

# ---------------------------------------------------------------- compaction
relists_before() {
    local n
    for n in 0 1; do
        ctl_metric "$n" 'gpuquota_controller_relists_total{resource="pods"}'
        ctl_metric "$n" 'gpuquota_controller_relists_total{resource="gpuquotas"}'
    done
}
wh_relisted() { (($(wh_relists "$1") > wh_before[$1])); }
ctl_relisted() { (($(ctl_metric "$1" "gpuquota_controller_relists_total{resource=\"$2\"}") > $3)); }
wh_relists() { grep -c 'kube cache /apis/gpuquota.io/v1alpha1/gpuquotas: resourceVersion .* gone, relisting' "$E2E/webhook-$1.log"; }
read -r -a ctl_before <<<"$(relists_before | tr '\n' ' ')"
declare -a wh_before
for n in 0 1 2; do wh_before[n]=$(wh_relists "$n"); done
old_rv=$(kubectl get --raw "/api/v1/namespaces/$NSA/pods" | jq -r .metadata.resourceVersion)

# Freeze every gpuquota process, then change what they watch behind their backs.
for pid in $(procs); do kill -STOP "$pid"; done
kubectl -n "$NSA" delete pod a1 --wait=true --timeout=60s >/dev/null
check "$NSA/a1 deleted while gpuquota was frozen" "" "$(kubectl -n "$NSA" get pod a1 -o name 2>/dev/null)"
kubectl -n "$NSA" patch gpuquota team --type=merge -p '{"spec":{"hard":{"gpu-memory":"20Gi"}}}' >/dev/null
check "$NSA quota lowered to 20Gi while gpuquota was frozen" 0 $?
{ ns "$NSC" || eventually 90 kubectl -n "$NSC" get serviceaccount default; } && quota "$NSC" team '{gpu-memory: 4Gi, gpu-pods: 10}'
check "$NSC quota created while gpuquota was frozen" 0 $?
ns "$NSD" || eventually 90 kubectl -n "$NSD" get serviceaccount default
# More writes, so that what the watches last saw is far behind.
for i in $(seq 0 199); do
    printf -- '---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: churn-%d}\ndata: {i: "%d"}\n' "$i" "$i"
done | kubectl -n "$NSC" apply -f - >/dev/null
rev=$(compact_etcd)
check_match "etcd compacted to its current revision" '^[0-9]+$' "$rev"
echo "# etcd compacted at revision $rev (last seen by the watches: ~$old_rv)"
"$ROOT/scripts/local-cluster.sh" restart-apiserver "$E2E/cluster" >/dev/null ||
    { fail "kube-apiserver restart"; finish; }
out=$(kubectl get --raw "/api/v1/namespaces/$NSA/pods?resourceVersion=$old_rv&resourceVersionMatch=Exact" 2>&1)
check_match "a list at the resourceVersion the watches last saw is refused: compacted" \
    'Error from server \(Expired\)|too old resource version' "$out"
for pid in $(procs); do kill -CONT "$pid"; done
t0=$(now_ms)

# The webhooks' watches are broken now and reconnect after a backoff. A
# quota created meanwhile must be enforced all the same (from the cache once
# relisted, or read live before).
quota "$NSD" team '{gpu-memory: 4Gi, gpu-pods: 10}'
tq=$(now_ms)
sleep 0.3 # as for $NSB: past watch delivery
enforced_at_once "$NSD" "as the watches came back" 8Gi 4Gi
check "$NSD: no pod over the quota exists" "" "$(kubectl -n "$NSD" get pods -o name)"

# Every cache resumes from a compacted resourceVersion: 410, relist.
for n in 0 1 2; do
    if eventually 40 wh_relisted "$n"; then
        pass "webhook $n relisted GPUQuotas after 410 ($(($(now_ms) - t0)) ms after the thaw)"
    else
        fail "webhook $n did not relist GPUQuotas: $(tail -3 "$E2E/webhook-$n.log")"
    fi
done
i=0
for n in 0 1; do
    for r in pods gpuquotas; do
        if eventually 40 ctl_relisted "$n" "$r" "${ctl_before[i]:-0}"; then
            pass "controller $n relisted $r after 410"
        else
            fail "controller $n relists_total{resource=$r} stayed ${ctl_before[i]:-0}"
        fi
        i=$((i + 1))
    done
done

# Enforcement: the quota made while frozen is known to every replica.
for n in 0 1 2; do
    refused "$NSC: replica $n denies 8Gi after the relist (dry run)" team 8Gi 0 4Gi "$(review "$n" "$NSC" 8Gi)"
done
for i in 1 2 3 4 5 6; do
    out=$(create_pod "$NSC" over-$i 8Gi)
    denied "$NSC: 8Gi pod over the quota made while frozen is denied (try $i)" team 8Gi 0 4Gi "$out"
done
out=$(create_pod "$NSC" c1 4Gi)
check "$NSC/c1 (4Gi, exactly the quota) created" 0 $?

# Status: the pod deleted while frozen no longer counts (a2 8Gi + a3 4Gi).
eventually 45 used_is "$NSA" team gpu-memory 12Gi &&
    pass "$NSA status dropped the pod deleted while frozen ($(($(now_ms) - t0)) ms after the thaw)"
check "$NSA used gpu-memory after the relist" 12Gi "$(used "$NSA" team gpu-memory)"
check "$NSA used gpu-pods after the relist" 2 "$(used "$NSA" team gpu-pods)"
check "$NSA status.hard follows the lowered spec" 20Gi "$(kubectl -n "$NSA" get gpuquota team -o jsonpath='{.status.hard.gpu-memory}')"
eventually 30 used_is "$NSC" team gpu-memory 4Gi
check "$NSC used gpu-memory" 4Gi "$(used "$NSC" team gpu-memory)"
# 12Gi used + 8Gi = 20Gi: fits the lowered quota exactly; then nothing more does.
out=$(create_pod "$NSA" a4 8Gi)
check "$NSA/a4 (8Gi) fills the lowered quota exactly" 0 $?
out=$(create_pod "$NSA" a5 4Gi)
denied "$NSA/a5 (4Gi) over the lowered quota is denied" team 4Gi 20Gi 20Gi "$out"
eventually 20 used_is "$NSA" team gpu-memory 20Gi
check "$NSA used gpu-memory at the end" 20Gi "$(used "$NSA" team gpu-memory)"
eventually 20 no_reservations "$NSA" team
check "$NSA holds no reservations at the end" 0 "$(reservations "$NSA" team)"
eventually 40 one_leader && pass "exactly one leader after the compaction" ||
    fail "exactly one leader after the compaction (holder [$(lease holderIdentity)])"

# ---------------------------------------------------------------- watches held down
# Replica 3 (not in the Service: probed directly) reads kube-apiserver
# through test/e2e/tools/watch_hold_proxy.py. Once the hold file exists the
# proxy closes its connections and holds every watch request unanswered,
# while lists and gets go through: the replica's caches are not fresh for as
# long as the hold lasts, and what changes meanwhile it can only read live.
ns "$NSE" || fail "namespace $NSE"
ns "$NSF" || fail "namespace $NSF"
quota "$NSE" team '{gpu-memory: 16Gi, gpu-pods: 10}'
hold=$E2E/hold-watches
rm -f "$hold"
python3 "$ROOT/test/e2e/tools/watch_hold_proxy.py" --cert "$E2E/cluster/pki/apiserver.crt" \
    --key "$E2E/cluster/pki/apiserver.key" --ca "$E2E/cluster/pki/ca.crt" \
    --upstream "127.0.0.1:$APISERVER_PORT" --hold-file "$hold" \
    >"$E2E/aux-watch-proxy.out" 2>"$E2E/aux-watch-proxy.log" &
echo $! >"$E2E/aux-watch-proxy.pid"
eventually 10 test -s "$E2E/aux-watch-proxy.out" || fail "the watch-holding proxy starts"
pport=$(head -1 "$E2E/aux-watch-proxy.out")
[[ -f $E2E/webhook.kubeconfig ]] || sa_kubeconfig gpuquota-webhook "$E2E/webhook.kubeconfig"
sed "s|server: \"$APISERVER\"|server: \"https://127.0.0.1:$pport\"|" "$E2E/webhook.kubeconfig" \
    >"$E2E/webhook-held.kubeconfig"
WH_KUBECONFIG=$E2E/webhook-held.kubeconfig webhook_start 3 ||
    fail "replica 3 starts through the proxy and syncs"
refused "$NSE: replica 3 enforces the quota it synced (16Gi)" team 20Gi 0 16Gi "$(review 3 "$NSE" 20Gi)"
touch "$hold"
held() { grep -c 'held watch /apis/gpuquota.io/v1alpha1/gpuquotas' "$E2E/aux-watch-proxy.log"; }
held_once() { (($(held) >= 1)); }
eventually 20 held_once || true
check_match "replica 3's GPUQuota watch is held (its caches are not fresh)" '^[1-9]' "$(held)"
quota "$NSE" tight '{gpu-memory: 4Gi}'
quota "$NSF" team '{gpu-memory: 4Gi, gpu-pods: 10}'
sleep 1 # far past watch delivery: a replica trusting its cache would answer from it now
# Its cache knows $NSE's first quota only: trusted, it would admit 8Gi.
refused "$NSE: replica 3, watches held, enforces a second quota made after they went down" \
    tight 8Gi 0 4Gi "$(review 3 "$NSE" 8Gi)"
refused "$NSF: replica 3, watches held, enforces a quota made after they went down" \
    team 8Gi 0 4Gi "$(review 3 "$NSF" 8Gi)"
check "$NSF: ...and admits what fits it" allowed "$(review 3 "$NSF" 4Gi)"
check_match "the watch is still held after the probes" '^[1-9]' "$(held)"
rm -f "$hold"
webhook_stop 3
rm -f "$E2E/webhook-3.pid"
stop_pidfile "$E2E/aux-watch-proxy.pid" TERM 20

finish
