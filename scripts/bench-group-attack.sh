#!/usr/bin/env bash
# The webhook's peak memory under the pod-group attack: a tenant (edit role,
# its own token) labels N CPU-only pods into a pod group, each carrying an
# annotation of SIZE bytes, then creates queued GPU members of that group
# concurrently, so each member's /validate reads the group. Prints each
# webhook replica's peak RSS (VmHWM) before and after, the container limit
# deploy/webhook.yaml sets, and the time a member create took. A figure, not
# a test: run it on an optimised build (no sanitizer keeps freed memory).
#
#   scripts/bench-group-attack.sh BUILD_DIR   (BUILD_DIR/gpuquota, e.g. build-bench)
#   GQ_BENCH_GROUP_PODS=450 GQ_BENCH_GROUP_PAD=120000 GQ_BENCH_GROUP_MEMBERS=8
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: bench-group-attack.sh BUILD_DIR}
GQ=$(cd "$build" && pwd)/gpuquota
N=${GQ_BENCH_GROUP_PODS:-450}
PAD=${GQ_BENCH_GROUP_PAD:-120000}
M=${GQ_BENCH_GROUP_MEMBERS:-8}
dir=$(mktemp -d /tmp/gq-group-attack.XXXXXX)
trap '"$ROOT/test/e2e/suite.sh" down "$dir/e2e" >/dev/null 2>&1; rm -rf "$dir"' EXIT
"$ROOT/scripts/k8s-bin.sh" >/dev/null
"$ROOT/test/e2e/suite.sh" up "$dir/e2e" "$GQ" >/dev/null
export GQ_E2E_DIR=$dir/e2e GQ ROOT
# shellcheck source=../test/e2e/lib.sh
source "$ROOT/test/e2e/lib.sh"

NS=bench-group
ns "$NS"
kubectl -n "$NS" create serviceaccount tenant >/dev/null
kubectl -n "$NS" create rolebinding tenant-edit --clusterrole=edit --serviceaccount="$NS:tenant" >/dev/null
token=$(kubectl -n "$NS" create token tenant --duration=1h)
tk() { kubectl --server "$APISERVER" --certificate-authority "$E2E/cluster/pki/ca.crt" \
    --token "$token" --kubeconfig /dev/null -n "$NS" "$@"; }
quota "$NS" team '{gpu-memory: 64Gi}' 'whenExceeded: Queue'
hwm() {
    local f out=""
    for f in "$E2E"/webhook-*.pid; do
        out+="$(awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$(cat "$f")/status") "
    done
    echo "${out% }"
}
limit=$(sed -n 's/.*limits: {memory: \([0-9A-Za-z]*\)}.*/\1/p' "$ROOT/deploy/webhook.yaml" | head -1)
pad=$(head -c "$PAD" /dev/zero | tr '\0' 'x')
echo "webhook replicas' peak RSS (MiB) at start: $(hwm); container limit (deploy/webhook.yaml): $limit"
t0=$(date +%s.%N)
for i in $(seq 1 "$N"); do
    printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: cpu-%s\n  labels: {gpuquota.io/pod-group: g}\n' "$i"
    printf '  annotations: {pad: "%s"}\nspec:\n  containers: [{name: c, image: registry.example/app:1}]\n---\n' "$pad"
done >"$dir/cpu.yaml"
created=$(tk create -f "$dir/cpu.yaml" 2>&1 | grep -c created || true)
t1=$(date +%s.%N)
echo "$created of $N CPU-only pods labelled into group g ($PAD-byte annotation each) in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') s"
echo "peak RSS after them: $(hwm)"
tk create -f - >/dev/null <<<"$(gpu_pod filler 60Gi)"
for i in $(seq 1 "$M"); do
    gpu_pod "m-$i" 1Gi '  labels: {gpuquota.io/pod-group: g}
  annotations: {gpuquota.io/pod-group-size: "'"$M"'"}' >"$dir/m-$i.yaml"
done
t0=$(date +%s.%N)
for i in $(seq 1 "$M"); do tk create -f "$dir/m-$i.yaml" >"$dir/m-$i.out" 2>&1 & done
wait
t1=$(date +%s.%N)
ok=$(cat "$dir"/m-*.out | grep -c created || true)
echo "$ok of $M queued members created concurrently in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') s"
cat "$dir"/m-*.out | grep -v created | head -3 || true
echo "peak RSS after the members: $(hwm)"
