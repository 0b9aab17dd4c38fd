#!/usr/bin/env bash
# Queue figures on the real control plane (issue 11; docs/performance.md).
# Figures only: nothing is asserted.
#
#   scripts/bench-queue.sh BUILD_DIR
#
# The control plane of test/e2e/suite.sh with gpuquota installed from
# deploy/ (3 webhook replicas, 2 controllers with leader election).
#   latency  one namespace, a Queue quota with room for one 1Gi pod, one pod
#            running and GQ_BENCH_QUEUE_LAT pods queued; the running pod is
#            deleted, the next one ungated, and so on. Time from the DELETE
#            to the controller's ungate PATCH of the next pod, both taken
#            from kube-apiserver's audit log: p50, p99, max.
#   latency under load  the same with GQ_BENCH_QUEUE_LOAD_LAT pods queued
#            in another namespace while test/bench/podcreate's churn
#            (open loop) creates GQ_BENCH_QUEUE_LOAD GPU pods per second
#            through both webhooks, charged, and deletes as many, over
#            GQ_BENCH_QUEUE_LOAD_NS namespaces with a GPUQuota each; the
#            load's own create and delete latency (from each one's
#            scheduled time) is printed beside it.
#   scale    GQ_BENCH_QUEUE_PODS pods (test/bench/podcreate, 16 clients)
#            queued across GQ_BENCH_QUEUE_NS namespaces, each with a Queue
#            quota full of one running pod; then every quota's hard is
#            raised at once. Time to drain (to the last ungate in
#            kube-apiserver's audit log), the leader's and kube-apiserver's
#            CPU time (utime + stime from /proc) and kube-apiserver's
#            requests per pod admitted;
#            before it, the CPU of one admission pass with every pod queued
#            and no room (gpuquota_queue_pass_cpu_seconds), and per pass of
#            the drain.
#   creates  before the scale run, in the same run: GQ_BENCH_QUEUE_ADMIT
#            pods created the same way into GQ_BENCH_QUEUE_NS namespaces
#            whose Deny quota has room (admitted at once), then deleted;
#            their creates/s, p50 and p99 printed beside those of the
#            pods that queue, with the leader controller's CPU over each.
# Environment: GQ_BENCH_QUEUE_LAT (100), GQ_BENCH_QUEUE_LOAD (50 creates/s
# and as many deletes/s; 0 skips the part under load), GQ_BENCH_QUEUE_LOAD_LAT
# (100), GQ_BENCH_QUEUE_LOAD_NS (50), GQ_BENCH_QUEUE_LOAD_SECONDS (200: the
# longest the load may run; the fill before it makes that many seconds of
# deletes), GQ_BENCH_QUEUE_PODS (10000; 0 skips the scale part),
# GQ_BENCH_QUEUE_NS (100), GQ_BENCH_QUEUE_ADMIT (GQ_BENCH_QUEUE_PODS; 0: no
# such run), GQ_BENCH_QUEUE_PPROF (seconds of kube-apiserver CPU profile
# taken over the drain; 0, the default: none), GQ_BENCH_OUT (folder kept with logs; default a
# temporary one, removed).
set -euo pipefail
# shellcheck source=scripts/bench-out.sh
. "$(dirname "$0")/bench-out.sh"
bench_out bench-queue "${1:-}"
LAT=${GQ_BENCH_QUEUE_LAT:-100}
LOAD=${GQ_BENCH_QUEUE_LOAD:-50}
LOAD_LAT=${GQ_BENCH_QUEUE_LOAD_LAT:-100}
LOAD_NS=${GQ_BENCH_QUEUE_LOAD_NS:-50}
LOAD_SECONDS=${GQ_BENCH_QUEUE_LOAD_SECONDS:-200}
PODS=${GQ_BENCH_QUEUE_PODS:-10000}
NSN=${GQ_BENCH_QUEUE_NS:-100}
ADMIT=${GQ_BENCH_QUEUE_ADMIT:-$PODS}
bench_cluster_up

qquota() { quota "$1" q "{gpu-memory: $2}" 'whenExceeded: Queue'; } # qquota NS HARD
gated() { kubectl -n "$1" get pods -o json | jq '[.items[] | select(.spec.schedulingGates)] | length'; }
seen() { gpu_pod probe 1Gi | kubectl -n "$1" create --dry-run=server -o json -f - | jq -e '.spec.schedulingGates'; }
# pass_cpu: "COUNT SUM" of the leader's gpuquota_queue_pass_cpu_seconds.
pass_cpu() {
    curl -fsS "http://127.0.0.1:$(ctl_port "$(leader)")/metrics" | awk '
        $1 == "gpuquota_queue_pass_cpu_seconds_count" {c = $2}
        $1 == "gpuquota_queue_pass_cpu_seconds_sum" {s = $2}
        END {print c + 0, s + 0}'
}
# per_pass LABEL "COUNT SUM" "COUNT SUM": passes between two pass_cpu and their mean CPU.
per_pass() {
    python3 -c 'import sys; c0, s0 = map(float, sys.argv[2].split()); c1, s1 = map(float, sys.argv[3].split())
n = c1 - c0
print("## %s: %d admission passes, %.2f ms of leader CPU per pass" % (sys.argv[1], n, (s1 - s0) * 1000 / max(n, 1)))' "$@"
}
cpu_s() { awk '{printf "%.2f", ($14 + $15) / 100}' "/proc/$1/stat"; }

# ------------------------------------------------------------- latency
# lat_setup NS N: in a fresh NS a Queue quota with room for one 1Gi pod, pod
# "run" admitted, N pods queued behind it.
lat_setup() {
    ns "$1"
    qquota "$1" 1Gi
    eventually 15 seen "$1"
    gpu_pod run 1Gi | kubectl -n "$1" create -f - >/dev/null 2>&1
    eventually 15 bash -c "[[ \$(kubectl -n $1 get pod run -o json | jq '.spec.schedulingGates | length') == 0 ]]"
    for i in $(seq -f '%04g' 1 "$2"); do gpu_pod "p$i" 1Gi; echo ---; done | kubectl -n "$1" create -f - >/dev/null 2>&1
}
# running NS: the one pod ungated and not being deleted.
running() {
    kubectl -n "$1" get pods -o json | jq -r '[.items[] | select((.spec.schedulingGates | not)
        and .metadata.deletionTimestamp == null) | .metadata.name] | join(" ")'
}
# lat_loop NS N: N times, the running pod deleted and the next one waited for.
lat_loop() {
    local cur=run
    for _ in $(seq "$2"); do
        kubectl -n "$1" delete pod "$cur" --grace-period=0 --force >/dev/null 2>&1
        moved() { local r; r=$(running "$1"); [[ -n $r && $r != "$cur" ]]; }
        eventually 30 moved "$1" || break
        cur=$(running "$1")
    done
}
# lat_report NS [FROM TO]: from kube-apiserver's audit log, each DELETE in NS
# (only those between the epoch seconds FROM and TO, if given) to the
# controller's next ungate PATCH there: p50, p99, max.
lat_report() {
    local sa=system:serviceaccount:$NS_SYS:gpuquota-controller
    jq -r --arg ns "$1" --arg sa "$sa" 'select(.stage == "ResponseComplete" and .objectRef.namespace == $ns
        and .objectRef.resource == "pods" and (.verb == "delete" or (.verb == "patch" and .user.username == $sa
        and .responseStatus.code == 200))) | [.stageTimestamp, .verb, .objectRef.name] | @tsv' \
        "$E2E"/cluster/audit*.log | sort | python3 -c '
import sys, datetime
lo, hi = (float(a) for a in sys.argv[1:3]) if len(sys.argv) > 2 else (0, float("inf"))
def ts(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
last_delete, d = None, []
for line in sys.stdin:
    t, verb, name = line.rstrip("\n").split("\t")
    if verb == "delete":
        last_delete = ts(t) if lo <= ts(t) <= hi else None
    elif last_delete is not None:
        d.append((ts(t) - last_delete) * 1000)
        last_delete = None
if not d:
    sys.exit("no DELETE followed by an ungate")
d.sort()
q = lambda p: d[min(len(d) - 1, int(round(p * (len(d) - 1))))]
print("pods %d  p50 %.0f ms  p99 %.0f ms  max %.0f ms" % (len(d), q(0.5), q(0.99), d[-1]))
' "${@:2}"
}

lat_setup bq-lat "$LAT"
lat_loop bq-lat "$LAT"
echo "## time from a pod ending (DELETE) to the next queued pod ungated (PATCH), $LAT pods (load average $(cut -d' ' -f1-3 /proc/loadavg))"
lat_report bq-lat

# ---------------------------------------------------- latency under load
# The same in namespace bq-load-lat while podcreate's churn, open loop,
# creates LOAD GPU pods per second (as users write them: both webhooks
# rewrite and charge them) and deletes as many in LOAD_NS other namespaces,
# each with a GPUQuota that has room for all; the churn deletes pods a fill
# made beforehand and is stopped once the LOAD_LAT pods have been measured
# (LOAD_SECONDS bounds it). Only the DELETEs made while the load ran count.
if ((LOAD > 0)); then
    for i in $(seq -f '%02g' 1 "$LOAD_NS"); do
        printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: bq-load-%s}\n---\n' "$i"
        printf 'apiVersion: gpuquota.io/v1alpha1\nkind: GPUQuota\nmetadata: {name: q, namespace: bq-load-%s}\n' "$i"
        printf 'spec: {hard: {gpu-memory: 1000000Gi}}\n---\n'
    done | kubectl apply -f - >/dev/null
    load_nss=$(seq -f 'bq-load-%02g' 1 "$LOAD_NS" | paste -sd,)
    for n in ${load_nss//,/ }; do eventually 30 kubectl -n "$n" get serviceaccount default; done
    lat_setup bq-load-lat "$LOAD_LAT"
    fill=$((LOAD * LOAD_SECONDS + LOAD_NS))
    "$podcreate" fill --kubeconfig "$KUBECONFIG" --namespaces "$load_nss" --clients 32 --pods "$fill" \
        --quantity 1Gi --run load-fill 2>&1 | sed 's/^/## /'
    C=$E2E/cluster
    "$podcreate" churn --kubeconfig "$KUBECONFIG" --namespaces "$load_nss" --rate "$LOAD" \
        --seconds "$LOAD_SECONDS" --clients 16 --run load --fill-run load-fill --fill-pods "$fill" \
        --latency=false --open-loop --as-user --quantity 1Gi \
        --pid "apiserver=$(cat "$C/kube-apiserver.pid")" --pid "etcd=$(cat "$C/etcd.pid")" \
        --pid "controller=$(ctl_pid 0)" --pid "controller=$(ctl_pid 1)" >"$out/load.json" 2>"$out/load.err" &
    churn_pid=$!
    sleep 3 # the churn's clients connected and its pace kept
    load0=$(cut -d' ' -f1-3 /proc/loadavg)
    lat_loop bq-load-lat "$LOAD_LAT"
    kill -INT "$churn_pid" 2>/dev/null || true
    wait "$churn_pid" || { echo "## the load failed:"; cat "$out/load.err"; }
    echo "## the same under load: $LOAD GPU pod creates/s + $LOAD deletes/s over $LOAD_NS other namespaces" \
        "(load average before $load0, after $(cut -d' ' -f1-3 /proc/loadavg))"
    lat_report bq-load-lat "$(jq -r .start_unix "$out/load.json")" \
        "$(jq -r '.start_unix + .seconds' "$out/load.json")"
    jq -r '"## the load: \(.creates) creates (\(.creates_per_second * 10 | round / 10)/s) + \(.deletes) deletes (\(.deletes_per_second * 10 | round / 10)/s) in \(.seconds * 10 | round / 10) s\(if .stopped_early then " (stopped once the queue was measured)" else "" end), \(.errors) errors\(if .first_error then " (\(.first_error))" else "" end); from the scheduled time, create p50/p99/max \(.create_ms.p50)/\(.create_ms.p99)/\(.create_ms.max) ms, delete \(.delete_ms.p50)/\(.delete_ms.p99)/\(.delete_ms.max) ms; CPU s \(.cpu_s | to_entries | map("\(.key) \(.value)") | join(", ")), the machine busy \(.machine_busy_s) of \(.machine_s)"' "$out/load.json"
fi

# creates_line LABEL FILE: a podcreate run's creates/s, latency and the
# leader controller's CPU over it.
creates_line() {
    jq -r --arg l "$1" '"## creates, \($l): \(.admitted) of \(.sent) in \(.seconds * 10 | round / 10) s, \(.per_second * 10 | round / 10)/s, p50 \(.p50_ms * 10 | round / 10) ms, p99 \(.p99_ms * 10 | round / 10) ms; leader CPU \((.cpu_s.leader // 0) * 100 | round / 100) s"' "$2"
}

# ------------------------------------------------------ creates admitted
if ((ADMIT > 0)); then
    anss=""
    for i in $(seq -f '%03g' 1 "$NSN"); do
        n=ba-$i
        kubectl create namespace "$n" >/dev/null
        quota "$n" q '{gpu-memory: 100000Gi}'
        anss+=${anss:+,}$n
    done
    for i in $(seq -f '%03g' 1 "$NSN"); do eventually 30 kubectl -n "ba-$i" get serviceaccount default; done
    eventually 30 bash -c "[[ -n \$(kubectl -n ba-$(printf %03d "$NSN") get gq q -o jsonpath='{.status.hard}') ]]"
    "$podcreate" run --kubeconfig "$KUBECONFIG" --namespaces "$anss" --clients 16 --pods "$ADMIT" \
        --quantity 1Gi --run ba --pid "leader=$(ctl_pid "$(leader)")" >"$out/admit.json" 2>"$out/admit.err" || true
    "$podcreate" clean --kubeconfig "$KUBECONFIG" --namespaces "$anss" \
        --selector bench.gpuquota.io/run=ba >/dev/null 2>&1 || true
fi

# --------------------------------------------------------------- scale
((PODS > 0)) || exit 0
nss=""
for i in $(seq -f '%03g' 1 "$NSN"); do
    n=bqd-$i
    kubectl create namespace "$n" >/dev/null
    qquota "$n" 1Gi
    nss+=${nss:+,}$n
done
for i in $(seq -f '%03g' 1 "$NSN"); do eventually 30 kubectl -n "bqd-$i" get serviceaccount default; done
eventually 30 seen "bqd-$(printf %03d "$NSN")"
for i in $(seq -f '%03g' 1 "$NSN"); do gpu_pod filler 1Gi | kubectl -n "bqd-$i" create -f - >/dev/null 2>&1; done
t0=$(date +%s.%N)
"$podcreate" run --kubeconfig "$KUBECONFIG" --namespaces "$nss" --clients 16 --pods "$PODS" \
    --quantity 1Gi --run bq --pid "leader=$(ctl_pid "$(leader)")" >"$out/create.json" 2>"$out/create.err" || true
t1=$(date +%s.%N)
total=0
for i in $(seq -f '%03g' 1 "$NSN"); do total=$((total + $(gated "bqd-$i"))); done
echo "## $total pods queued across $NSN namespaces, created in $(python3 -c "print('%.0f' % ($t1 - $t0))") s"
((ADMIT > 0)) && creates_line "admitted at once ($NSN namespaces, Deny quota with room)" "$out/admit.json"
creates_line "queued ($NSN namespaces, Queue quota full)" "$out/create.json"
all_settled() {
    local i
    for i in $(seq -f '%03g' 1 "$NSN"); do
        [[ $(kubectl -n "bqd-$i" get gq q -o jsonpath='{.status.queuedPods}') == "$(gated "bqd-$i")" ]] || return 1
    done
}
eventually 300 all_settled || true
# Passes with every pod still queued and no room: each pod created in bq-lat
# (full) runs one, which plans the whole queue and admits nobody.
p0=$(pass_cpu)
for i in $(seq -f '%02g' 1 20); do
    gpu_pod "idle$i" 1Gi | kubectl -n bq-lat create -f - >/dev/null 2>&1
    sleep 0.5
done
sleep 2
per_pass "$total queued, no room" "$p0" "$(pass_cpu)"
pid=$(ctl_pid "$(leader)")
C=$E2E/cluster
apid=$(cat "$C/kube-apiserver.pid")
# The drain's end is the last ungate in kube-apiserver's audit log, which a
# follower counts: polling the pods would list all of them every time, on
# the CPUs the drain needs.
python3 "$ROOT/scripts/bench-kueue-audit.py" follow "system:serviceaccount:$NS_SYS:gpuquota-controller" \
    bqd- "$total" 1800 "$C/audit.log" >"$out/follow" &
follower=$!
sleep 1
# GQ_BENCH_QUEUE_PPROF=SECONDS: kube-apiserver's CPU profile over the first
# SECONDS of the drain, into $out/drain-apiserver.pprof (go tool pprof).
if ((${GQ_BENCH_QUEUE_PPROF:-0} > 0)); then
    kubectl get --raw "/debug/pprof/profile?seconds=$GQ_BENCH_QUEUE_PPROF" >"$out/drain-apiserver.pprof" &
fi
api_reqs "$out/req-0"
p0=$(pass_cpu)
c0=$(cpu_s "$pid")
a0=$(cpu_s "$apid")
d0=$(date +%s.%N)
for i in $(seq -f '%03g' 1 "$NSN"); do
    kubectl -n "bqd-$i" patch gq q --type=merge -p '{"spec":{"hard":{"gpu-memory":"100000Gi"}}}' >/dev/null &
done
wait "$follower" || true
wait
c1=$(cpu_s "$pid")
a1=$(cpu_s "$apid")
api_reqs "$out/req-1"
read -r got last <"$out/follow"
((got == total)) || echo "# the queue did not drain within 30 min: $got of $total ungated"
per_pass "drain" "$p0" "$(pass_cpu)"
python3 - "$got" "$d0" "$last" "$c0" "$c1" "$a0" "$a1" <<'EOF'
import sys
n, d0, d1, c0, c1, a0, a1 = int(sys.argv[1]), *map(float, sys.argv[2:])
print("## drain: %d queued pods ungated in %.1f s (%.0f pods/s); leader CPU %.2f s, %.3f ms per admission;"
      " kube-apiserver CPU %.2f s, %.2f ms per admission"
      % (n, d1 - d0, n / max(d1 - d0, 1e-9), c1 - c0, (c1 - c0) * 1000 / max(n, 1), a1 - a0,
         (a1 - a0) * 1000 / max(n, 1)))
EOF
reqs_per_pod "## drain" "$got" "$out/req-0" "$out/req-1"
