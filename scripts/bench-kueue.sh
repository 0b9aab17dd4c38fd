#!/usr/bin/env bash
# gpuquota's queue against Kueue's, on the same real control plane, with the
# same workloads, in one run (issue 27; docs/performance.md, "Against Kueue").
# Figures only: nothing is asserted.
#
#   scripts/bench-kueue.sh BUILD_DIR
#
# The control plane of test/e2e/suite.sh with gpuquota installed from deploy/
# (3 webhook replicas, 2 controllers with leader election), and Kueue's
# manager (scripts/kueue-bin.sh: cmd/kueue of sigs.k8s.io/kueue, its CRDs and
# RBAC role read from the module) as a local process with its service
# account's token, the plain-pod integration on, its webhooks registered by
# URL with a CA of our own. gpuquota goes first, then its controllers are
# stopped and Kueue's manager started: each runs alone on the same cluster.
#   gpuquota  a GPUQuota with whenExceeded: Queue per namespace; pods ask
#             gpuquota.io/gpu-memory: 1Gi (rewritten to aliyun.com/gpu-mem: 1)
#   Kueue     a ClusterQueue (one ResourceFlavor) and a LocalQueue per
#             namespace, nominalQuota on aliyun.com/gpu-mem, the device
#             resource the pods are placed with; pods ask aliyun.com/gpu-mem: 1
#             and carry kueue.x-k8s.io/queue-name. Kueue's namespaces carry
#             gpuquota.io/exempt=true (gpuquota's webhooks skip them) and
#             bench.gpuquota.io/kueue=true (the only ones Kueue manages).
# Both: pods name no scheduler (they stay Pending once ungated), so the
# figures are the queues' alone.
#   latency  room for every pod; GQ_BENCH_KUEUE_LAT pods created one by one,
#            0.25 s apart: from the create (requestReceivedTimestamp) to the
#            controller's ungate PATCH (stageTimestamp), from the audit log.
#   drain    GQ_BENCH_KUEUE_NS namespaces, each quota full of one running pod;
#            GQ_BENCH_KUEUE_PODS pods created (test/bench/podcreate, 16
#            clients), all queued; then every quota raised at once (GPUQuota
#            spec.hard, ClusterQueue nominalQuota). Drain time: from before the
#            raise to the last ungate in the audit log. CPU (utime + stime) of
#            kube-apiserver, etcd, the controller (gpuquota's leader, Kueue's
#            manager) and gpuquota's webhooks, over the queueing (creates until
#            every pod is known queued) and over the drain, per pod; the
#            controller's RSS (VmRSS, VmHWM) after the drain.
# Kueue's manager, with its own certificate management off, reads its metrics
# serving pair from /etc/kueue/metrics/certs: the script writes Kueue's
# serving pair there (marked /etc/kueue/.gpuquota-bench; an /etc/kueue of
# anyone else's stops it).
# Environment: GQ_BENCH_KUEUE_LAT (100), GQ_BENCH_KUEUE_PODS (10000),
# GQ_BENCH_KUEUE_NS (100), GQ_BENCH_KUEUE_QPS (Kueue's clientConnection qps,
# default 50 with burst 100 as its shipped configuration has; burst is twice
# it; a negative qps turns its client-side rate limit off),
# GQ_BENCH_KUEUE_SYSTEMS (which of "gq kq" run; default both),
# GQ_KUEUE_VERSION (scripts/kueue-bin.sh), GQ_BENCH_OUT (folder kept with
# logs; default a temporary one, removed).
set -euo pipefail
# shellcheck source=scripts/bench-out.sh
. "$(dirname "$0")/bench-out.sh"
bench_out bench-kueue "${1:-}"
audit_py=$ROOT/scripts/bench-kueue-audit.py
LAT=${GQ_BENCH_KUEUE_LAT:-100}
PODS=${GQ_BENCH_KUEUE_PODS:-10000}
NSN=${GQ_BENCH_KUEUE_NS:-100}
QPS=${GQ_BENCH_KUEUE_QPS:-50}
SYSTEMS=${GQ_BENCH_KUEUE_SYSTEMS:-gq kq}
{ read -r kbin && read -r ksrc; } < <("$ROOT/scripts/kueue-bin.sh" --quiet)
bench_cluster_up
trap 'cp "$E2E/kueue.log" "$out/" 2>/dev/null; bench_cluster_down' EXIT
C=$E2E/cluster
KD=$E2E/kueue
KSA=kueue-controller-manager
declare -A USER=([gq]=system:serviceaccount:$NS_SYS:gpuquota-controller
    [kq]=system:serviceaccount:kueue-system:$KSA)
declare -A GATE=([gq]=gpuquota.io/quota [kq]=kueue.x-k8s.io/admission)

# ---------------------------------------------------------------- Kueue
# kueue_install: CRDs, RBAC, serving certificate and configuration.
kueue_install() {
    mkdir -p "$KD"
    kubectl apply --server-side -f "$ksrc/config/components/crd/bases" >/dev/null
    kubectl create namespace kueue-system >/dev/null
    kubectl -n kueue-system create serviceaccount "$KSA" >/dev/null
    sed 's/^  name: manager-role$/  name: kueue-manager-role/' "$ksrc/config/components/rbac/role.yaml" |
        kubectl apply -f - >/dev/null
    kubectl create clusterrolebinding kueue-manager-rolebinding --clusterrole=kueue-manager-role \
        --serviceaccount="kueue-system:$KSA" >/dev/null
    # and the Role on Secrets of its own namespace, whose cache its controllers wait for
    sed 's/^  namespace: system$/  namespace: kueue-system/' "$ksrc/config/components/rbac/manager_secrets_role.yaml" |
        kubectl apply -f - >/dev/null
    kubectl -n kueue-system create rolebinding manager-secrets-rolebinding --role=manager-secrets-role \
        --serviceaccount="kueue-system:$KSA" >/dev/null
    token_kubeconfig "$KSA" "$(kubectl -n kueue-system create token "$KSA" --duration=24h)" "$KD/kubeconfig"
    "$GQ" certs generate --service kueue-webhook-service --namespace kueue-system --out "$KD/certs" \
        --san 127.0.0.1 >/dev/null
    # With its own cert management off, the manager reads a metrics serving
    # pair from this fixed path at start (cmd/kueue/main.go), metrics off or not.
    if [[ -d /etc/kueue && ! -f /etc/kueue/.gpuquota-bench ]]; then
        echo "bench-kueue: /etc/kueue exists and was not made by this script; not touching it" >&2
        return 1
    fi
    mkdir -p /etc/kueue/metrics/certs
    cp "$KD/certs/tls.crt" "$KD/certs/tls.key" /etc/kueue/metrics/certs/
    touch /etc/kueue/.gpuquota-bench
    kwport=$(free_port)
    khport=$(free_port)
    # The shipped controller_manager_config.yaml, but: no cert management of
    # its own, no leader election (one replica), loopback ports, metrics off,
    # the plain-pod integration only, in the labelled namespaces only.
    cat >"$KD/config.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health: {healthProbeBindAddress: "127.0.0.1:$khport"}
metrics: {bindAddress: "0"}
webhook: {port: $kwport, host: 127.0.0.1, certDir: "$KD/certs"}
internalCertManagement: {enable: false}
leaderElection: {leaderElect: false}
controller:
  groupKindConcurrency: {Job.batch: 5, Pod: 5, Workload.kueue.x-k8s.io: 5, LocalQueue.kueue.x-k8s.io: 1,
    Cohort.kueue.x-k8s.io: 1, ClusterQueue.kueue.x-k8s.io: 1, ResourceFlavor.kueue.x-k8s.io: 1}
clientConnection: {qps: $QPS, burst: $((QPS > 0 ? QPS * 2 : 100))}
managedJobsNamespaceSelector: {matchLabels: {bench.gpuquota.io/kueue: "true"}}
integrations: {frameworks: [pod]}
EOF
}

# kueue_webhooks: Kueue's webhook configurations (config/components/webhook)
# for pods and its own kinds, called by URL; the pod webhooks only in the
# namespaces Kueue manages.
kueue_webhooks() {
    python3 - "$ksrc/config/components/webhook/manifests.yaml" "$kwport" "$KD/certs/ca.crt" <<'PY' |
import base64, sys, yaml
src, port, ca = sys.argv[1], sys.argv[2], open(sys.argv[3], "rb").read()
out = []
for doc in yaml.safe_load_all(open(src)):
    if not doc:
        continue
    keep = []
    for w in doc["webhooks"]:
        groups = {g for r in w["rules"] for g in r["apiGroups"]}
        if not groups <= {"", "kueue.x-k8s.io"}:
            continue
        w["clientConfig"] = {"url": "https://127.0.0.1:%s%s" % (port, w["clientConfig"]["service"]["path"]),
                             "caBundle": base64.b64encode(ca).decode()}
        if groups == {""}:
            w["namespaceSelector"] = {"matchLabels": {"bench.gpuquota.io/kueue": "true"}}
        keep.append(w)
    doc["metadata"] = {"name": "kueue-" + doc["metadata"]["name"]}
    doc["webhooks"] = keep
    out.append(doc)
yaml.safe_dump_all(out, sys.stdout)
PY
        kubectl apply -f - >/dev/null
}

kueue_start() {
    KUBECONFIG=$KD/kubeconfig "$kbin/kueue" --config "$KD/config.yaml" \
        --feature-gates=VisibilityOnDemand=false >>"$E2E/kueue.log" 2>&1 &
    echo $! >"$E2E/aux-kueue.pid"
    if ! eventually 90 curl -fsS "http://127.0.0.1:$khport/readyz"; then
        echo "Kueue's manager did not become ready:" >&2
        tail -20 "$E2E/kueue.log" >&2
        return 1
    fi
    kueue_webhooks
    kubectl apply -f - >/dev/null <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
EOF
}

# ------------------------------------------------------------ workloads
# queue_ns SYS NS UNITS: namespace NS with a queue of room UNITS GiB.
queue_ns() {
    if [[ $1 == gq ]]; then
        ns "$2"
        quota "$2" q "{gpu-memory: $3Gi}" 'whenExceeded: Queue'
        return
    fi
    ns "$2" bench.gpuquota.io/kueue=true gpuquota.io/exempt=true
    kubectl apply -f - >/dev/null <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq-$2}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: $2}}
  resourceGroups:
  - coveredResources: [aliyun.com/gpu-mem]
    flavors:
    - name: default-flavor
      resources: [{name: aliyun.com/gpu-mem, nominalQuota: "$3"}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: $2}
spec: {clusterQueue: cq-$2}
EOF
}
# raise SYS NS: room for every pod.
raise() {
    if [[ $1 == gq ]]; then
        kubectl -n "$2" patch gq q --type=merge -p '{"spec":{"hard":{"gpu-memory":"20000Gi"}}}' >/dev/null
    else
        kubectl patch clusterqueue "cq-$2" --type=json \
            -p '[{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota","value":"20000"}]' >/dev/null
    fi
}
# pod SYS NAME: one 1Gi pod as that system's user writes it.
pod() {
    local lim='gpuquota.io/gpu-memory: "1Gi"' labels='app: trainer'
    [[ $1 == gq ]] || { lim='aliyun.com/gpu-mem: "1"'; labels+=', kueue.x-k8s.io/queue-name: lq'; }
    printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: %s, labels: {%s}}\nspec:\n  schedulerName: bench-none\n' "$2" "$labels"
    printf '  containers: [{name: main, image: registry.example/cuda:12, resources: {limits: {%s}}}]\n' "$lim"
}
# ready SYS NS: a server-side dry run of a pod in NS comes back gated, and
# (Kueue) the namespace's LocalQueue is active.
ready() {
    pod "$1" probe | kubectl -n "$2" create --dry-run=server -o json -f - |
        jq -e --arg g "${GATE[$1]}" '[.spec.schedulingGates[]?.name] | index($g)' || return 1
    [[ $1 == gq ]] || [[ $(kubectl -n "$2" get localqueue lq \
        -o jsonpath='{.status.conditions[?(@.type=="Active")].status}') == True ]]
}
# gated_in SYS [NS...]: pods still carrying SYS's gate (in NS, or everywhere).
gated_in() {
    local sel=(-A)
    [[ $# -lt 2 ]] || sel=(-n "$2")
    kubectl get pods "${sel[@]}" -o json | jq --arg g "${GATE[$1]}" \
        '[.items[] | select([.spec.schedulingGates[]?.name] | index($g))] | length'
}
no_gated() { [[ $(gated_in "$@") == 0 ]]; }
# queued_known SYS N: the controller has taken in N queued pods (gpuquota:
# status.queuedPods of its quotas; Kueue: pendingWorkloads of its ClusterQueues).
queued_known() {
    local n
    if [[ $1 == gq ]]; then
        n=$(kubectl get gq -A -o json | jq '[.items[] | .status.queuedPods // 0] | add // 0')
    else
        n=$(kubectl get clusterqueues -o json | jq '[.items[] | .status.pendingWorkloads // 0] | add // 0')
    fi
    [[ $n == "$2" ]]
}
ctl_pid_of() { if [[ $1 == gq ]]; then ctl_pid "$(leader)"; else cat "$E2E/aux-kueue.pid"; fi; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# cpu SYS: "apiserver etcd controller webhooks" CPU ticks now.
cpu() {
    local w=0 f
    if [[ $1 == gq ]]; then
        for f in "$E2E"/webhook-*.pid; do w=$((w + $(ticks "$(cat "$f")"))); done
    fi
    echo "$(ticks "$(cat "$C/kube-apiserver.pid")") $(ticks "$(cat "$C/etcd.pid")") $(ticks "$(ctl_pid_of "$1")") $w"
}
# per_pod LABEL N "CPU0" "CPU1": CPU per pod between two cpu readings.
per_pod() {
    python3 - "$@" <<'PY'
import sys
label, n, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
d = [(int(y) - int(x)) * 10.0 / max(n, 1) for x, y in zip(a, b)]
print("%s, ms of CPU per pod: kube-apiserver %.2f  etcd %.2f  controller %.2f  webhooks %.2f" % (label, *d))
PY
}
rss() { awk '/^VmRSS|^VmHWM/ {printf "%s %.0f MiB  ", $1, $2 / 1024}' "/proc/$(ctl_pid_of "$1")/status"; }
load() { echo "# load: $(cut -d' ' -f1-3 /proc/loadavg)"; }

# latency SYS: room for every pod, LAT pods created 0.25 s apart.
latency() {
    local n=$1-lat i
    queue_ns "$1" "$n" 20000
    eventually 30 ready "$1" "$n"
    load
    for i in $(seq -f '%04g' 1 "$LAT"); do
        pod "$1" "p$i" | kubectl -n "$n" create -f - >/dev/null 2>>"$out/kubectl.err"
        sleep 0.25
    done
    eventually 120 no_gated "$1" "$n" || echo "# $1: pods still gated after 120 s"
    load
    echo "## $1: pod create -> ungate with room, $LAT pods one by one"
    python3 "$audit_py" latency "${USER[$1]}" "$n" $(ls -tr "$C"/audit*.log)
}

# drain SYS: NSN full queues, PODS pods queued, then room for all.
drain() {
    local s=$1 i n nss="" c0 c1 c2 t0 t1 d0 got last follower lab=() raisers
    for i in $(seq -f '%03g' 1 "$NSN"); do
        n=$s-d$i
        queue_ns "$s" "$n" 1
        nss+=${nss:+,}$n
        pod "$s" filler | kubectl -n "$n" create -f - >/dev/null 2>>"$out/kubectl.err"
    done
    eventually 60 ready "$s" "$s-d$(printf %03d "$NSN")"
    eventually 120 no_gated "$s" || echo "# $s: fillers still gated"
    [[ $s == gq ]] || lab=(--label kueue.x-k8s.io/queue-name=lq --resource aliyun.com/gpu-mem --quantity 1)
    load
    api_reqs "$out/req-$s-0"
    c0=$(cpu "$s")
    t0=$(date +%s.%N)
    "$podcreate" run --kubeconfig "$KUBECONFIG" --namespaces "$nss" --clients 16 --pods "$PODS" \
        --quantity 1Gi --run "b$s" "${lab[@]}" >"$out/create-$s.json" 2>"$out/create-$s.err" || true
    t1=$(date +%s.%N)
    eventually 600 queued_known "$s" "$PODS" || echo "# $s: not every pod known queued after 600 s"
    c1=$(cpu "$s")
    api_reqs "$out/req-$s-1"
    echo "## $s: $PODS pods queued across $NSN namespaces: created in $(python3 -c "print('%.1f' % ($t1 - $t0))") s," \
        "all known queued after $(python3 -c "import time; print('%.1f' % (time.time() - $t0))") s"
    per_pod "## $s: queueing" "$PODS" "$c0" "$c1"
    reqs_per_pod "## $s: queueing" "$PODS" "$out/req-$s-0" "$out/req-$s-1"
    load
    python3 "$audit_py" follow "${USER[$s]}" "$s-d" "$PODS" 1800 "$C/audit.log" >"$out/follow-$s" &
    follower=$!
    sleep 1
    api_reqs "$out/req-$s-2"
    c1=$(cpu "$s")
    d0=$(date +%s.%N)
    raisers=()
    for i in $(seq -f '%03g' 1 "$NSN"); do
        raise "$s" "$s-d$i" &
        raisers+=($!)
    done
    wait "${raisers[@]}"
    wait "$follower" || true
    c2=$(cpu "$s")
    api_reqs "$out/req-$s-3"
    read -r got last <"$out/follow-$s"
    python3 -c "import sys; n, d0, t = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
print('## %s: drain: %d queued pods ungated in %.1f s (%.0f pods/s)' % (sys.argv[4], n, t - d0, n / max(t - d0, 1e-9)))" \
        "$got" "$d0" "$last" "$s"
    per_pod "## $s: drain" "$got" "$c1" "$c2"
    reqs_per_pod "## $s: drain" "$got" "$out/req-$s-2" "$out/req-$s-3"
    echo "## $s: controller $(rss "$s"); still gated: $(gated_in "$s")"
    load
}

echo "# $("$GQ" version 2>/dev/null | head -1); Kueue $(basename "$kbin"); $(kubectl version -o json |
    jq -r '"kube-apiserver " + .serverVersion.gitVersion')"
kueue_install
if [[ " $SYSTEMS " == *" gq "* ]]; then
    latency gq
    drain gq
    # gpuquota's queues off the cluster: Kueue runs alone.
    kubectl delete namespace gq-lat $(seq -f 'gq-d%03g' 1 "$NSN") --wait=false >/dev/null 2>&1 || true
    eventually 600 bash -c '[[ -z $(kubectl get ns -o name | grep "^namespace/gq-") ]]' ||
        echo "# gpuquota's namespaces still there after 600 s"
fi
controller_stop 0
controller_stop 1
if [[ " $SYSTEMS " == *" kq "* ]]; then
    kueue_start
    latency kq
    drain kq
fi
