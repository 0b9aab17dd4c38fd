#!/usr/bin/env bash
# gpuquota's own image running as pods on a real node (docs/e2e.md, "The real
# node"): a control plane of scripts/local-cluster.sh plus one node of
# scripts/real-node.sh (kubelet, kube-proxy, containerd, runc, CNI bridge);
# the image of scripts/build-image.sh loaded into its containerd; deploy/
# applied as docs/install.md tells (kubectl apply -k, the certificate steps),
# with only a nodeSelector added so that gpuquota's pods go to the real node
# and not to kwok's pretend ones. Then, through the Services as in any
# cluster: the pods become Ready through their probes, read the API server
# with the in-cluster configuration, and kube-apiserver calls the webhook
# pods; a GPU pod is rewritten, charged and denied over quota, a queued pod
# is ungated by the controller's pod, `kubectl gpuquota top` shows it; a
# webhook pod deleted during a stream of GPU pod creates fails none of them,
# kill -9 of one is measured and recovers, a node drain keeps to the PDBs.
#
#   test/real_node.sh GPUQUOTA WORKDIR [IMAGE.tar]      (needs root)
#
# IMAGE.tar: the image scripts/build-image.sh made of this tree already
# (image_runs_under_runc's), instead of building it again.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GQ=$(cd "$(dirname "${1:?usage: real_node.sh GPUQUOTA WORKDIR}")" && pwd)/$(basename "$1")
work=${2:?usage: real_node.sh GPUQUOTA WORKDIR}
export GQ ROOT GQ_E2E_DIR=$work/e2e
built=built
[[ -z ${3:-} ]] || { export GQ_IMAGE_TAR=$3; built="$3 (built by image_runs_under_runc)"; }
down() {
    "$ROOT/scripts/real-node.sh" down "$GQ_E2E_DIR/cluster" >/dev/null 2>&1
    "$ROOT/scripts/local-cluster.sh" down "$GQ_E2E_DIR/cluster" >/dev/null 2>&1
}
[[ ! -d $GQ_E2E_DIR/cluster ]] || down
rm -rf "$work"
mkdir -p "$GQ_E2E_DIR"
trap down EXIT
"$ROOT/scripts/local-cluster.sh" up "$GQ_E2E_DIR/cluster" >"$work/cluster.log" 2>&1 ||
    { echo "FAIL - the control plane starts: $(tail -3 "$work/cluster.log")"; exit 1; }
# shellcheck source=e2e/lib.sh
source "$ROOT/test/e2e/lib.sh"

t0=$SECONDS
"$ROOT/scripts/real-node.sh" up "$GQ_E2E_DIR/cluster" >"$work/node.log" 2>&1 ||
    { fail "the real node starts: $(tail -5 "$work/node.log")"; finish; }
pass "node-0 (kubelet, containerd, runc, CNI, kube-proxy) is Ready in $((SECONDS - t0)) s"
# ------------------------------------------------- installed as docs/install.md says
t0=$SECONDS
"$ROOT/scripts/install-real-node.sh" "$GQ_E2E_DIR/cluster" "$GQ" "$work" >"$work/install.log" 2>&1 ||
    { fail "the image is built, loaded and installed by kustomize: $(tail -5 "$work/install.log")"; finish; }
pass "image $built and loaded, deploy/ applied: webhook (3) and controller (2) pods Ready through their probes in $((SECONDS - t0)) s"
check "all on the real node, from the image named by the images: entry" "node-0 localhost/gpuquota:e2e" \
    "$(kubectl -n "$NS_SYS" get pods -o json | jq -r '[.items[] | "\(.spec.nodeName) \(.spec.containers[0].image)"] | unique | join(",")')"
check "five of them" 5 "$(kubectl -n "$NS_SYS" get pods --no-headers 2>/dev/null | wc -l)"
check_match "a webhook pod read the API server in-cluster and synced" "quota caches synced: ready" \
    "$(kubectl -n "$NS_SYS" logs deploy/gpuquota-webhook 2>&1)"
check_match "the controller pods elected a leader" "leading: reconciling as" \
    "$(for p in $(kubectl -n "$NS_SYS" get pods -l app.kubernetes.io/component=controller -o name); do
        kubectl -n "$NS_SYS" logs "$p" 2>&1; done)"

# ------------------------------------------------- admission through the Service
NS=team-node
ns "$NS" || fail "namespace $NS"
quota "$NS" team '{gpu-memory: 16Gi}'
seen() { gpu_pod probe 1Gi | kubectl -n "$NS" create --dry-run=server -f - >/dev/null 2>&1; }
eventually 60 seen || fail "the webhook pods never answered a dry run"
check_match "a GPU pod is admitted by the webhook pods" "created" \
    "$(gpu_pod p1 8Gi | kubectl -n "$NS" create -f - 2>&1)"
check_match "and rewritten for the sharing backend, with its admission record" "gpuquota.io/admission" \
    "$(kubectl -n "$NS" get pod p1 -o jsonpath='{.metadata.annotations}')"
is8() { [[ $(used "$NS" team gpu-memory) == 8Gi ]]; }
eventually 30 is8 || true
check "the controller pod counts it" "8Gi" "$(used "$NS" team gpu-memory)"
check_match "a pod over the quota is denied" "exceeded quota: team" \
    "$(gpu_pod p2 16Gi | kubectl -n "$NS" create -f - 2>&1)"
# The audit records, on the webhook pods' standard output (deploy/'s default),
# read back as docs/audit.md says: kubectl logs of every replica, piped in.
audit_p2() {
    kubectl -n "$NS_SYS" logs -l app.kubernetes.io/component=webhook --prefix --tail=-1 \
        --max-log-requests=10 2>/dev/null |
        "$GQ" audit --denied -o json 2>/dev/null |
        jq -r "select(.namespace == \"$NS\" and .name == \"p2\") | .decision + \" \" + .reason"
}
hasp2() { [[ $(audit_p2) == denied* ]]; }
eventually 30 hasp2 || true
check_match "its denial is in the audit records of kubectl logs, read by gpuquota audit" \
    "^denied exceeded quota: team" "$(audit_p2 | head -1)"

NSQ=team-node-queue
ns "$NSQ" || fail "namespace $NSQ"
quota "$NSQ" team '{gpu-memory: 8Gi}' 'whenExceeded: Queue'
seenq() { gpu_pod probe 1Gi | kubectl -n "$NSQ" create --dry-run=server -o json -f - 2>/dev/null | jq -e '.spec.schedulingGates' >/dev/null; }
eventually 60 seenq || true
# Queue order is priority, then creationTimestamp, which has whole seconds (a
# tie goes by uid): the second pod is created in a later second than the first.
later_than() {
    local t
    t=$(date -d "$(kubectl -n "$1" get pod "$2" -o jsonpath='{.metadata.creationTimestamp}')" +%s) || return
    while (($(date +%s) <= t)); do sleep 0.1; done
}
gpu_pod q1 8Gi | kubectl -n "$NSQ" create -f - >/dev/null
later_than "$NSQ" q1
gpu_pod q2 8Gi | kubectl -n "$NSQ" create -f - >/dev/null
gates() { kubectl -n "$NSQ" get pod "$1" -o jsonpath='{.spec.schedulingGates[*].name}' 2>/dev/null; }
ungated() { [[ -z $(gates "$1") ]]; }
eventually 30 ungated q1 || true
check "the first queued pod is ungated by the controller pod" "" "$(gates q1)"
check "the second waits" "gpuquota.io/quota" "$(gates q2)"
check_match "kubectl gpuquota top shows it" "team-node-queue" \
    "$(PATH=$work/plugin:$PATH; mkdir -p "$work/plugin"; ln -sf "$GQ" "$work/plugin/kubectl-gpuquota"; kubectl gpuquota top -A 2>&1)"
kubectl -n "$NSQ" delete pod q1 --wait=false >/dev/null
eventually 30 ungated q2 || true
check "once the first is gone, the controller pod ungates the second" "" "$(gates q2)"

# ------------- the memory of gpuquota's pods under a tenant's attacks, in deploy/'s limits
# An edit tenant makes every request as large as Kubernetes lets it: queued
# members of one pod group, each with 200 kB of annotations, created ten at a
# time (each member's /validate reads the group), and GPU pods of 8,000
# environment variables created sixteen at a time (each review is about
# 0.7 MB: kube-apiserver adds a managedFields entry per variable; 40,000 make
# a review over the 3 MiB a body may have, refused before it is read), and
# GPU pods of 20,000 labels eight at a time (each label costs about 1 kB of
# decoded JSON with its managedFields entry: the webhooks refuse such a pod
# with the reason rather than decode it whole, --max-decoded-memory). The
# peak resident memory of each webhook and controller process (VmHWM, read
# on the node) must stay under half the container limit deploy/ sets, and
# none may have been restarted. The image is an optimised build: no
# sanitizer keeps freed memory here.
NSM=team-node-mem
ns "$NSM" || fail "namespace $NSM"
quota "$NSM" team '{gpu-memory: 80Gi}' 'whenExceeded: Queue'
mkc=$work/tenant-mem.kubeconfig
tenant_kubeconfig "$NSM" tenant "$mkc" || fail "tenant kubeconfig in $NSM"
tm() { kubectl --kubeconfig "$mkc" -n "$NSM" "$@"; }
eventually 60 bash -c "$(declare -f gpu_pod pod_yaml containers); gpu_pod probe 1Gi | kubectl -n $NSM create --dry-run=server -o json -f - 2>/dev/null | jq -e .spec.schedulingGates >/dev/null" || true
gpu_pod filler 80Gi | tm create -f - >/dev/null 2>&1 || fail "the filler pod is created"
pad=$(head -c 200000 /dev/zero | tr '\0' x)
for i in $(seq 1 60); do
    gpu_pod "m$i" 1Gi "  labels: {gpuquota.io/pod-group: g}
  annotations: {gpuquota.io/pod-group-size: \"61\", pad: \"$pad\"}" >"$work/m$i.yaml"
done
for b in 0 1 2 3 4 5; do
    for i in $(seq $((b * 10 + 1)) $((b * 10 + 10))); do
        tm create -f "$work/m$i.yaml" >"$work/m$i.out" 2>&1 &
    done
    wait
done
made=$(cat "$work"/m*.out | grep -c created)
check "the tenant's 60 group members of 200 kB are created (queued)" 60 "$made"
python3 - "$work" <<'EOF'
import json, sys
env = [{"name": "E%d" % i, "value": "v"} for i in range(8000)]
for i in range(16):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big%d" % i},
           "spec": {"containers": [{"name": "main", "image": "registry.example/cuda:12", "env": env,
                                    "resources": {"limits": {"gpuquota.io/gpu-memory": "1Gi"}}}]}}
    with open("%s/big%d.json" % (sys.argv[1], i), "w") as f:
        json.dump(pod, f, separators=(",", ":"))
labels = {"l%d" % i: "v" for i in range(20000)}
for i in range(8):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lab%d" % i, "labels": labels},
           "spec": {"containers": [{"name": "main", "image": "registry.example/cuda:12",
                                    "resources": {"limits": {"gpuquota.io/gpu-memory": "1Gi"}}}]}}
    with open("%s/lab%d.json" % (sys.argv[1], i), "w") as f:
        json.dump(pod, f, separators=(",", ":"))
EOF
for i in $(seq 0 15); do tm create -f "$work/big$i.json" >"$work/big$i.out" 2>&1 & done
wait
check "the tenant's sixteen GPU pods of 8,000 variables are created (queued)" 16 "$(cat "$work"/big*.out | grep -c created)"
for i in $(seq 0 7); do tm create -f "$work/lab$i.json" >"$work/lab$i.out" 2>&1 & done
wait
check "none of the eight GPU pods of 20,000 labels is created" 0 "$(cat "$work"/lab*.out | grep -c created)"
check_match "they are refused with the reason" \
    'denied the request: gpuquota cannot decide this Pod: the JSON decodes to more than [0-9]+ bytes of objects' \
    "$(cat "$work"/lab*.out)"
limit_mib() { # COMPONENT: the memory limit deploy/COMPONENT.yaml sets, in MiB
    local q
    q=$(sed -n 's/.*limits: {memory: \([0-9]*\)\(Mi\|Gi\)}.*/\1 \2/p' "$ROOT/deploy/$1.yaml" | head -1)
    case ${q#* } in Mi) echo "${q% *}" ;; Gi) echo $((${q% *} * 1024)) ;; esac
}
peaks() { # COMPONENT: "pod peak-MiB restarts" for each of its pods
    local p cid pid
    for p in $(kubectl -n "$NS_SYS" get pods -l "app.kubernetes.io/component=$1" -o name); do
        cid=$(kubectl -n "$NS_SYS" get "$p" -o jsonpath='{.status.containerStatuses[0].containerID}')
        pid=$("$ROOT/scripts/real-node.sh" ctr "$GQ_E2E_DIR/cluster" tasks ls 2>/dev/null |
            awk -v id="${cid#containerd://}" '$1 == id {print $2}')
        echo "${p#pod/} $(awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$pid/status" 2>/dev/null || echo none)" \
            "$(kubectl -n "$NS_SYS" get "$p" -o jsonpath='{.status.containerStatuses[0].restartCount}')"
    done
}
for comp in webhook controller; do
    lim=$(limit_mib "$comp")
    out=$(peaks "$comp")
    echo "# $comp peak RSS (MiB) and restarts after the attacks, limit ${lim}Mi: $(paste -sd';' <<<"$out")"
    while read -r p mib restarts; do
        if [[ $mib =~ ^[0-9.]+$ ]] && awk -v m="$mib" -v l="$lim" 'BEGIN {exit !(m < l / 2)}'; then
            pass "$comp $p peaked at $mib MiB, under half its ${lim}Mi limit"
        else
            fail "$comp $p peaked at [$mib] MiB: not under half its ${lim}Mi limit"
        fi
        check "$comp $p was not restarted" 0 "$restarts"
    done <<<"$out"
done
kubectl delete namespace "$NSM" --wait=false >/dev/null 2>&1

# ----------------------------------- a webhook pod deleted during a stream of creates
NSS=team-node-stream
ns "$NSS" || fail "namespace $NSS"
quota "$NSS" team '{gpu-memory: 1Ti}'
eventually 60 bash -c "$(declare -f gpu_pod pod_yaml containers); gpu_pod probe 1Gi | kubectl -n $NSS create --dry-run=server -f - >/dev/null 2>&1" || true
victim=$(kubectl -n "$NS_SYS" get pods -l app.kubernetes.io/component=webhook -o name | head -1)
fails=0
for i in $(seq 1 60); do
    ((i == 10)) && kubectl -n "$NS_SYS" delete "$victim" --wait=false >/dev/null
    gpu_pod "s$i" 1Gi | kubectl -n "$NSS" create -f - >/dev/null 2>"$work/stream-$i.err" ||
        { fails=$((fails + 1)); echo "# create s$i: $(cat "$work/stream-$i.err")"; }
done
echo "# $fails of 60 GPU pod creates failed while webhook pod $victim was deleted"
check "no create fails while a webhook pod is deleted (3 replicas)" 0 "$fails"
eventually 120 kubectl -n "$NS_SYS" rollout status deployment gpuquota-webhook --timeout=5s || true

# ------------------------- kill -9 of a webhook process during a stream of creates
# No grace at all: the admissions in flight on the process, and those routed
# to its pod until kubelet has restarted it, fail (failurePolicy Fail);
# measured, and the replica must come back on its own.
wait_ready() { kubectl -n "$NS_SYS" rollout status deployment "$1" --timeout=5s >/dev/null 2>&1; }
gone() { ! kubectl -n "$NS_SYS" get "$1" >/dev/null 2>&1; }
eventually 60 gone "$victim" || fail "the deleted webhook pod $victim is gone"
eventually 120 wait_ready gpuquota-webhook || true
# A replica that is not being deleted (the one above stops through its
# shutdown delay, listed until then).
victim=pod/$(kubectl -n "$NS_SYS" get pods -l app.kubernetes.io/component=webhook -o json |
    jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name][0]')
cid=$(kubectl -n "$NS_SYS" get "$victim" -o jsonpath='{.status.containerStatuses[0].containerID}')
pid=$("$ROOT/scripts/real-node.sh" ctr "$GQ_E2E_DIR/cluster" tasks ls 2>/dev/null |
    awk -v id="${cid#containerd://}" '$1 == id {print $2}')
[[ $pid =~ ^[0-9]+$ ]] || fail "the webhook container's process is found (container ${cid:-none})"
fails=0
for i in $(seq 1 60); do
    ((i == 10)) && [[ $pid =~ ^[0-9]+$ ]] && kill -9 "$pid"
    gpu_pod "k$i" 1Gi | kubectl -n "$NSS" create -f - >/dev/null 2>"$work/kill-$i.err" ||
        { fails=$((fails + 1)); echo "# create k$i: $(cat "$work/kill-$i.err")"; }
done
echo "# $fails of 60 GPU pod creates failed around kill -9 of the webhook process of $victim"
restarted() { [[ $(kubectl -n "$NS_SYS" get "$victim" -o jsonpath='{.status.containerStatuses[0].restartCount}') -ge 1 ]]; }
eventually 60 restarted || true
check "kubelet restarts the killed webhook container" 1 \
    "$(kubectl -n "$NS_SYS" get "$victim" -o jsonpath='{.status.containerStatuses[0].restartCount}')"
eventually 120 wait_ready gpuquota-webhook || true
fails=0
for i in $(seq 1 30); do
    gpu_pod "r$i" 1Gi | kubectl -n "$NSS" create -f - >/dev/null 2>&1 || fails=$((fails + 1))
done
check "once it is Ready again, no create fails" 0 "$fails"

# ------------------------------------------------ a node drain, with the PDBs
# One real node: draining it evicts the webhook pods until the PDB
# (minAvailable: 1) refuses the last, and the controller's until its PDB
# (maxUnavailable: 1) refuses the second; GPU pod creates go on through the
# webhook pod kept, and the evicted ones stop through the shutdown delay.
kubectl -n "$NSS" delete pods --all --wait=false >/dev/null 2>&1
kubectl drain node-0 --ignore-daemonsets --delete-emptydir-data --timeout=40s \
    >"$work/drain.log" 2>&1 &
dr=$!
fails=0 n=0
while kill -0 "$dr" 2>/dev/null; do
    n=$((n + 1))
    gpu_pod "d$n" 1Gi | kubectl -n "$NSS" create -f - >/dev/null 2>"$work/drain-$n.err" ||
        { fails=$((fails + 1)); echo "# create d$n: $(cat "$work/drain-$n.err")"; }
    ((n < 400)) || break
done
wait "$dr"
echo "# kubectl drain node-0: $fails of $n GPU pod creates failed; drain: $(grep -c "evicted" "$work/drain.log") evicted"
check_match "the drain is refused by the webhook's PDB for its last replica" \
    "Cannot evict pod as it would violate the pod's disruption budget" "$(cat "$work/drain.log")"
running() { kubectl -n "$NS_SYS" get pods -l "app.kubernetes.io/component=$1" \
    --field-selector=status.phase=Running -o name 2>/dev/null | wc -l; }
check "one webhook pod is left serving" 1 "$(running webhook)"
check "one controller pod is left" 1 "$(running controller)"
check "no create fails during the drain" 0 "$fails"
kubectl uncordon node-0 >/dev/null
for d in gpuquota-webhook gpuquota-controller; do
    eventually 120 wait_ready "$d" || fail "deployment $d available again after uncordon"
done
pass "after uncordon the evicted replicas are Ready again"

# ------------------------------ the Helm chart, as an operator installs it
# Unmodified chart, hooks on, Deployments on, default values but for where
# gpuquota's pods go and the port a GKE private cluster needs (10250 in the
# pod, 443 at the Service); another namespace and release name than deploy/'s.
kubectl delete -k "$work/overlay" --wait=true --timeout=120s >/dev/null 2>&1
kubectl delete namespace "$NS" "$NSQ" "$NSS" --wait=true --timeout=120s >/dev/null 2>&1
REL=ops HNS=gq-ops
cat >"$work/values.yaml" <<EOF
webhook: {nodeSelector: {gpuquota.io/real-node: "true"}, port: 10250}
controller: {nodeSelector: {gpuquota.io/real-node: "true"}}
EOF
t0=$SECONDS
helm install "$REL" "$ROOT/deploy/helm/gpuquota" -n "$HNS" --create-namespace -f "$work/values.yaml" \
    --wait --timeout 5m >"$work/helm.log" 2>&1 || fail "helm install: $(tail -5 "$work/helm.log")"
pass "helm install (hooks as pods of the image, in $HNS) done in $((SECONDS - t0)) s"
check "the certificate hook Jobs ran and the Secrets exist" "kubernetes.io/tls" \
    "$(kubectl -n "$HNS" get secret gpuquota-webhook-tls -o jsonpath='{.type}' 2>&1)"
check "webhook and controller pods Ready on the real node" "node-0 True" \
    "$(kubectl -n "$HNS" get pods -l app.kubernetes.io/name=gpuquota,app.kubernetes.io/component!=certs \
        -o json | jq -r '[.items[] | "\(.spec.nodeName) \(.status.conditions[] | select(.type == "Ready") | .status)"] | unique | join(",")')"
check "the webhook pods serve on webhook.port" "10250" \
    "$(kubectl -n "$HNS" get pods -l app.kubernetes.io/component=webhook \
        -o jsonpath='{.items[*].spec.containers[0].ports[0].containerPort}' | tr ' ' '\n' | sort -u)"
ca=$(kubectl -n "$HNS" get secret gpuquota-webhook-ca -o jsonpath='{.data.bundle\.crt}')
check "kube-apiserver trusts the chart's CA (post-install hook)" "$ca" \
    "$(kubectl get mutatingwebhookconfiguration gpuquota -o jsonpath='{.webhooks[0].clientConfig.caBundle}')"
NS=team-helm
ns "$NS" || fail "namespace $NS"
quota "$NS" team '{gpu-memory: 8Gi}' 'whenExceeded: Queue'
eventually 60 bash -c "$(declare -f gpu_pod pod_yaml containers); gpu_pod probe 1Gi | kubectl -n $NS create --dry-run=server -o json -f - 2>/dev/null | jq -e .spec.schedulingGates >/dev/null" || true
gpu_pod h1 8Gi | kubectl -n "$NS" create -f - >/dev/null 2>&1
later_than "$NS" h1
gpu_pod h2 8Gi | kubectl -n "$NS" create -f - >/dev/null 2>&1
hgates() { kubectl -n "$NS" get pod "$1" -o jsonpath='{.spec.schedulingGates[*].name}' 2>/dev/null; }
hungated() { [[ -z $(hgates "$1") ]]; }
eventually 60 hungated h1 || true
check "in $HNS, the controller's own ungate is trusted: the first pod runs" "" "$(hgates h1)"
check "the second waits for quota" "gpuquota.io/quota" "$(hgates h2)"
check_match "the pod was charged through the release's webhooks" \
    "gpuquota.io/admission" "$(kubectl -n "$NS" get pod h1 -o jsonpath='{.metadata.annotations}')"
# The renewal CronJob, run now as the cluster would run it: a pod of the
# image that finds the pair valid and keeps it.
kubectl -n "$HNS" create job renew-now --from=cronjob/gpuquota-certs >/dev/null 2>&1
kubectl -n "$HNS" wait --for=condition=complete job/renew-now --timeout=120s >/dev/null 2>&1 ||
    fail "the renewal CronJob's Job completes: $(kubectl -n "$HNS" get pods -l job-name=renew-now 2>&1 | tail -2)"
check_match "the renewal CronJob's pod keeps a valid pair and writes the Secrets after the caBundle" \
    "valid beyond --renew-days; kept; Secrets $HNS/gpuquota-webhook-ca and gpuquota-webhook-tls written after the caBundle" \
    "$(kubectl -n "$HNS" logs job/renew-now 2>&1)"

# Operations, measured (figures only; the assertions are about failures).
# The leader's pod deleted: how long until the new leader ungates.
leader=$(kubectl -n "$HNS" get lease gpuquota-controller -o jsonpath='{.spec.holderIdentity}')
lpod=$(kubectl -n "$HNS" get pods -l app.kubernetes.io/component=controller -o name |
    grep -F "${leader%_*}" | head -1)
kubectl -n "$HNS" delete "$lpod" --wait=false >/dev/null
kubectl -n "$NS" delete pod h1 --wait=false >/dev/null
t0=$(date +%s.%N)
eventually 120 hungated h2 || true
echo "# leader pod ${lpod#pod/} deleted: the new leader ungated the next pod after $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s"
check "a new leader ungates after the leader's pod is deleted" "" "$(hgates h2)"
# helm upgrade to a new image tag while GPU pods are created.
"$ROOT/scripts/real-node.sh" ctr "$GQ_E2E_DIR/cluster" images tag ghcr.io/gpuquota/gpuquota:0.1.0 \
    ghcr.io/gpuquota/gpuquota:0.1.1 >/dev/null
quota "$NS" big '{gpu-memory: 1Ti}'
helm upgrade "$REL" "$ROOT/deploy/helm/gpuquota" -n "$HNS" -f "$work/values.yaml" \
    --set image.tag=0.1.1 --wait --timeout 5m >>"$work/helm.log" 2>&1 &
up=$!
fails=0 n=0
while kill -0 "$up" 2>/dev/null || ((n < 20)); do
    n=$((n + 1))
    pod_yaml "u$n" 'cpu: 100m' | kubectl -n "$NS" create -f - >/dev/null 2>"$work/up-$n.err" ||
        { fails=$((fails + 1)); echo "# create u$n: $(cat "$work/up-$n.err")"; }
    gpu_pod "g$n" 1Gi | kubectl -n "$NS" create -f - >/dev/null 2>"$work/upg-$n.err" ||
        { grep -q "exceeded quota" "$work/upg-$n.err" || { fails=$((fails + 1)); echo "# create g$n: $(cat "$work/upg-$n.err")"; }; }
    ((n < 400)) || break
done
wait "$up" || fail "helm upgrade: $(tail -3 "$work/helm.log")"
echo "# helm upgrade to 0.1.1: $fails of $((2 * n)) creates failed while it rolled the pods"
check "the release runs the new tag" "ghcr.io/gpuquota/gpuquota:0.1.1" \
    "$(kubectl -n "$HNS" get deploy gpuquota-webhook -o jsonpath='{.spec.template.spec.containers[0].image}')"
check "no create fails during helm upgrade" 0 "$fails"
kubectl delete namespace "$NS" --wait=true --timeout=120s >/dev/null 2>&1
helm uninstall "$REL" -n "$HNS" --wait --timeout 3m >>"$work/helm.log" 2>&1 || fail "helm uninstall"
gone_secrets() { [[ -z $(kubectl -n "$HNS" get secret gpuquota-webhook-tls gpuquota-webhook-ca -o name 2>/dev/null) ]]; }
eventually 60 gone_secrets || true
check "helm uninstall: the post-delete hook removed the Secrets" "" \
    "$(kubectl -n "$HNS" get secret gpuquota-webhook-tls gpuquota-webhook-ca -o name 2>/dev/null)"
check "and no webhook configuration is left" "" \
    "$(kubectl get mutatingwebhookconfiguration,validatingwebhookconfiguration gpuquota -o name 2>/dev/null)"
gone_pods() { [[ -z $(kubectl -n "$HNS" get pods -o name 2>/dev/null) ]]; }
eventually 60 gone_pods || true
# Nothing of the release is left but the CRDs (helm keeps crds/) and the
# objects of them; the namespace's own defaults are not the release's.
check "nor any other object of the release in $HNS" "" \
    "$(kubectl -n "$HNS" get all,serviceaccount,configmap,secret,role,rolebinding,poddisruptionbudget,networkpolicy,lease,cronjob,job \
        -o name 2>/dev/null | grep -v -e '^configmap/kube-root-ca.crt$' -e '^serviceaccount/default$' | sort | paste -sd' ')"
check "nor cluster roles and bindings" "" \
    "$(kubectl get clusterrole,clusterrolebinding -o name 2>/dev/null | grep gpuquota | paste -sd' ')"
check "the CRDs stay" 3 "$(kubectl get crd -o name | grep -c 'gpuquota.io$')"
finish
