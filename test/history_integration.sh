#!/usr/bin/env bash
# The API server loses its history (etcd restored from a backup, control
# plane rebuilt at the same address) while a real `gpuquota webhook` and a
# real `gpuquota controller` watch it. The stand-in goes back to a snapshot:
# objects, resourceVersion counter and event history; open watches end, and
# a watch from a resourceVersion it has not reached gets kube-apiserver's
# 504 "Too large resource version". The caches must relist rather than keep
# the old state forever: a quota created afterwards is enforced (a 10Gi quota
# does not admit 11Gi), pods running afterwards are counted, even one that
# takes over the name and the very resourceVersion of a pod that was lost.
# Usage: history_integration.sh GPUQUOTA KUBE-STANDIN
set -uo pipefail
gq=$1
standin=$2
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/gq-history-it.XXXXXX)
host=wh.gq-system.svc
source "$root/test/integration_lib.sh"
source "$root/test/standin_lib.sh"
source "$root/test/cluster_lib.sh"

k apply -f "$root/deploy/crds/" >/dev/null || { echo "CRDs not applied"; exit 1; }
k create namespace team-h >/dev/null
start_gq_webhook
register_gq_webhooks
start_gq_controller
q() { curl -s "$S/apis/gpuquota.io/v1alpha1/namespaces/team-h/gpuquotas/$1"; }
used() { q "$1" | jq -r '.status.used."gpu-memory" // "-"'; }
rv() { curl -s "$S/standin/stats" | jq -r .resourceVersion; }
pod() { gq_pod team-h "$@"; }
denied() { echo "admission webhook \"validate.gpuquota.io\" denied the request: $1"; }

# The backup: CRDs, the namespace and the webhook configurations.
curl -s -X POST "$S/standin/snapshot" >/dev/null

# Life goes on after the backup: a generous quota, a pod, more writes.
k apply -f - >/dev/null <<'EOF'
apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: old, namespace: team-h}
spec: {hard: {gpu-memory: 100Gi}}
EOF
check "pod p before the restore" "p" "$(pod p 2Gi | k create -f - | created)"
LOST_RV=$(k get pod p -n team-h -o jsonpath='{.metadata.resourceVersion}')
for i in $(seq 20); do k create configmap "filler-$i" -n team-h >/dev/null; done
eventually "the controller counts pod p" 10 "2Gi" used old

# The restore.
curl -s -X POST "$S/standin/restore" >/dev/null
check "the quota of the old history is gone" 404 \
    "$(curl -s -o /dev/null -w '%{http_code}' "$S/apis/gpuquota.io/v1alpha1/namespaces/team-h/gpuquotas/old")"

# The new history: a 10Gi quota, then writes up to just before the
# resourceVersion pod p had, so that the new pod p gets that very version.
k apply -f - >/dev/null <<'EOF'
apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: ten, namespace: team-h}
spec: {hard: {gpu-memory: 10Gi}}
EOF
eventually "the webhook enforces the quota created after the restore (no 11Gi in 10Gi)" 15 \
    "$(denied 'exceeded quota: ten, requested: gpu-memory=11Gi, used: gpu-memory=0, limited: gpu-memory=10Gi')" \
    bash -c "$(declare -f gq_pod pod); pod big 11Gi | timeout 30 kubectl create --dry-run=server -f - 2>&1 | grep -v '^Warning:' | sed 's/^Error from server (Forbidden): error when creating \"STDIN\": //'"
eventually "the controller reconciled the new quota" 10 "0" used ten
# Creating p writes twice: the webhook's charge in the quota, then the pod.
n=0
while (($(rv) < LOST_RV - 2)); do
    k create configmap "refill-$n" -n team-h >/dev/null
    n=$((n + 1))
done
check "pod p again, with 10Gi" "p" "$(pod p 10Gi | k create -f - | created)"
check "it has the resourceVersion the lost pod p had" "$LOST_RV" \
    "$(k get pod p -n team-h -o jsonpath='{.metadata.resourceVersion}')"
eventually "the controller counts the new pod p, not the lost one" 15 "10Gi" used ten
OUT=$(pod q 1Gi | k create -f - 2>&1)
check_match "then the quota is full" 'exceeded quota: ten, requested: gpu-memory=1Gi, used: gpu-memory=10Gi, limited: gpu-memory=10Gi' "$OUT"
check_match "the controller relisted after losing history" '^[1-9]' \
    "$(metric 'gpuquota_controller_history_resets_total{resource="pods"}')"
check "the controller is ready again" 200 \
    "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$mport/readyz")"

stop_all webhook.log controller.log standin.err
finish
