#!/usr/bin/env bash
# The whole product in one box: the kube-apiserver stand-in calls
# `gpuquota webhook` (mutate + validate over HTTPS) for pods created with
# kubectl, and `gpuquota controller` keeps the quotas' status in sync.
# Usage: demo-cluster.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
gq="$build/gpuquota"
standin="$build/test/kube-standin"
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../test/manifests.sh
source "$root/test/manifests.sh"
work=$(mktemp -d /tmp/gq-demo-cluster.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

wait_for() { # wait_for FILE SED-EXPR: print the first match once it appears
    local v=
    for _ in $(seq 150); do
        v=$(sed -n "$2" "$1" | head -1)
        [[ -n "$v" ]] && { echo "$v"; return 0; }
        sleep 0.1
    done
    echo "timed out waiting in $1:" >&2
    cat "$1" >&2
    return 1
}
say() { printf '\n== %s\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@" 2>&1 || true; }

"$standin" --port 0 >"$work/standin.out" 2>"$work/standin.err" &
pids+=($!)
sport=$(wait_for "$work/standin.out" 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p')
export KUBECONFIG=$work/kubeconfig HOME=$work
cat >"$KUBECONFIG" <<KC
apiVersion: v1
kind: Config
clusters: [{name: demo, cluster: {server: "http://127.0.0.1:$sport"}}]
contexts: [{name: demo, context: {cluster: demo, user: admin}}]
current-context: demo
users: [{name: admin, user: {token: demo}}]
KC
say "a kube-apiserver stand-in on 127.0.0.1:$sport; CRDs, namespaces, quotas and a limit range applied with kubectl"
kubectl apply -f "$root/deploy/crds/"
kubectl create namespace team-a
kubectl apply -f - <<'NS'
apiVersion: v1
kind: Namespace
metadata: {name: ml-research, labels: {team: ml}}
NS
kubectl apply -f "$root/deploy/examples/quotas/"

say "gpuquota webhook and gpuquota controller against it"
"$gq" certs generate --service gpuquota-webhook --namespace gpuquota-system --out "$work/certs" \
    --san 127.0.0.1 >/dev/null
"$gq" webhook --tls-cert "$work/certs/tls.crt" --tls-key "$work/certs/tls.key" \
    --listen 127.0.0.1:0 --kubeconfig "$KUBECONFIG" 2>"$work/webhook.log" &
pids+=($!)
wport=$(wait_for "$work/webhook.log" 's/.*"listening on [^"]*:\([0-9][0-9]*\)".*/\1/p')
ready=
for _ in $(seq 150); do
    if [[ $(curl -s -o /dev/null -w '%{http_code}' --cacert "$work/certs/ca.crt" \
        "https://127.0.0.1:$wport/readyz") == 200 ]]; then
        ready=1
        break
    fi
    sleep 0.1
done
if [[ -z "$ready" ]]; then
    echo "the webhook did not become ready:" >&2
    cat "$work/webhook.log" >&2
    exit 1
fi
echo "webhook on 127.0.0.1:$wport, ready (caches synced)"
"$gq" controller --kubeconfig "$KUBECONFIG" --metrics-listen 127.0.0.1:0 2>"$work/controller.log" &
pids+=($!)
wait_for "$work/controller.log" 's/.*"\(metrics listening on port [0-9]*\)".*/controller \1/p'
CA=$(base64 -w0 <"$work/certs/ca.crt")
{
    gq_webhook_yaml mutate "https://127.0.0.1:$wport" "$CA" gpuquota
    echo ---
    gq_webhook_yaml validate "https://127.0.0.1:$wport" "$CA" gpuquota
} | kubectl apply -f -
sleep 1

say "before: kubectl get gq,gtq -A"
run kubectl get gq,gtq -A

# shellcheck source=demo-story.sh
source "$root/scripts/demo-story.sh"
demo_story

say "what the scheduler sees: the rewritten requests"
run kubectl get pods -n team-a -o custom-columns='NAME:.metadata.name,GPU-MEM:.spec.containers[0].resources.limits.aliyun\.com/gpu-mem,CHARGED:.metadata.annotations.gpuquota\.io/charged'

sleep 1.5
say "after: the controller recounted usage from the pods"
run kubectl get gq,gtq -A

say "notebook finishes (phase Succeeded): its charge is freed"
run kubectl patch pod notebook -n team-a --subresource status --type merge \
    -p '{"status":{"phase":"Succeeded"}}'
sleep 1.5
run kubectl get gq team-a -n team-a
echo
echo "-- the quota's status, as the controller wrote it:"
kubectl get gq team-a -n team-a -o jsonpath='{.status}' | python3 -m json.tool
