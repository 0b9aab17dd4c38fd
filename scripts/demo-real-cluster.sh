#!/usr/bin/env bash
# The cluster demo on a real control plane: kube-apiserver, etcd,
# kube-controller-manager, kube-scheduler and kwok's simulated GPU nodes
# (scripts/local-cluster.sh), plus one real node (scripts/real-node.sh:
# kubelet, kube-proxy, containerd, runc, CNI) where gpuquota runs as pods of
# its own image, installed from deploy/ as docs/install.md tells
# (scripts/install-real-node.sh); pods created with kubectl, placed by
# kube-scheduler on nodes of the model they pinned, and the quotas' true
# usage. Needs root (kubelet), and the real node free: one per machine.
# Usage: demo-real-cluster.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
gq=$(cd "$build" && pwd)/gpuquota
dir=$(mktemp -d /tmp/gq-demo-real.XXXXXX)
down() {
    "$root/scripts/real-node.sh" down "$dir/cluster" >/dev/null 2>&1 || true
    "$root/scripts/local-cluster.sh" down "$dir/cluster" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap down EXIT

say() { printf '\n== %s\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@" 2>&1 || true; }

say "a real control plane on 127.0.0.1 and a real node; gpuquota's image installed from deploy/ (docs/install.md)"
"$root/scripts/local-cluster.sh" up "$dir/cluster" >"$dir/cluster.log" 2>&1 ||
    { tail -5 "$dir/cluster.log" >&2; exit 1; }
"$root/scripts/real-node.sh" up "$dir/cluster" >"$dir/node.log" 2>&1 || { tail -5 "$dir/node.log" >&2; exit 1; }
export GQ_E2E_DIR=$dir GQ=$gq ROOT=$root
# shellcheck source=../test/e2e/lib.sh
source "$root/test/e2e/lib.sh"
set +u
"$root/scripts/install-real-node.sh" "$dir/cluster" "$gq" "$dir/install"
run kubectl version
run kubectl get nodes -L nvidia.com/gpu.product
echo "-- gpuquota's own pods, Running on the real node (node-0):"
run kubectl -n gpuquota-system get pods -o wide
run kubectl -n gpuquota-system get endpointslices

say "team-a and the ml tenant, with the example quotas and limit range"
kubectl create namespace team-a >/dev/null
kubectl create namespace ml-research >/dev/null
kubectl label namespace ml-research team=ml >/dev/null
eventually 30 kubectl -n team-a get serviceaccount default
eventually 30 kubectl -n ml-research get serviceaccount default
run kubectl apply -f "$root/deploy/examples/quotas/"
run kubectl get gq,gtq,glr -A
sleep 1 # the webhooks' informer caches

# shellcheck source=demo-story.sh
source "$root/scripts/demo-story.sh"
demo_story
echo "-- an L4 slice in ml-research:"
demo_pod l4-infer ml-research l4 '{gpuquota.io/gpu-memory: 6Gi}' | run kubectl create -f -

say "kube-scheduler placed the rewritten pods on nodes of their model; kwok runs them"
for p in team-a/notebook team-a/trainer team-a/inference team-a/last ml-research/train-4x ml-research/l4-infer; do
    eventually 30 bash -c "[[ \$(kubectl -n ${p%/*} get pod ${p#*/} -o jsonpath='{.status.phase}') == Running ]]" || true
done
run kubectl get pods -A -l gpuquota.io/managed=true -o wide
run kubectl get pods -A -l gpuquota.io/managed=true -o custom-columns='NAMESPACE:.metadata.namespace,NAME:.metadata.name,NODE:.spec.nodeName,GPU-MEM:.spec.containers[0].resources.limits.aliyun\.com/gpu-mem,GPUS:.spec.containers[0].resources.limits.nvidia\.com/gpu,CHARGED:.metadata.annotations.gpuquota\.io/charged'
echo "-- each node's GPU model (GPU Feature Discovery's label):"
run kubectl get nodes -L nvidia.com/gpu.product

say "the controller recounted usage from the pods"
# A tenant's used may trail its namespaces' by seconds after a burst of
# admissions (docs/controller.md, "How long a tenant's status may lag"): wait
# for what the table below shows, and say so if it never comes.
eventually 60 bash -c "[[ \$(kubectl -n team-a get gq team-a -o jsonpath='{.status.used.gpu-memory}') == 64Gi ]]" ||
    echo "(team-a's used is not 64Gi yet after 60 s)"
eventually 60 bash -c "[[ \$(kubectl get gtq ml -o jsonpath='{.status.used.gpu-memory}') == 326Gi ]]" ||
    echo "(tenant ml's used is not 326Gi yet after 60 s)"
run kubectl get gq,gtq -A

say "inference is deleted: its charge is freed"
run kubectl -n team-a delete pod inference --wait=false
eventually 15 bash -c "[[ \$(kubectl -n team-a get gq team-a -o jsonpath='{.status.used.gpu-memory}') == 48Gi ]]" || true
run kubectl get gq,gtq -A

say "the admission decisions, reviewed with gpuquota audit: gpuquota's own log, then kube-apiserver's"
# The webhook pods' audit records, on their standard output (deploy/'s default).
run bash -c "kubectl -n gpuquota-system logs -l app.kubernetes.io/component=webhook --prefix --tail=-1 | '$gq' audit --denied"
run "$gq" audit "$dir/cluster/audit.log" -o summary
