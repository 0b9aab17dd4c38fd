#!/usr/bin/env bash
# A quota created while the webhook's watches are down is enforced at once
# (DESIGN.md 4: "a quota is enforced from spec.hard as soon as it exists").
# The stand-in cuts the real `gpuquota webhook`'s watch of a resource and
# fails its reconnects (503), as while kube-apiserver restarts: the cache
# stays synced but misses every change, so the webhook reads that resource
# live from the API server instead.
#   - a GPUQuota created then: a pod over it is denied, one that fits is
#     charged;
#   - the live read fails as well: GPU pods are denied (fail closed) with
#     the reason, CPU-only pods are not affected;
#   - a GPULimitRange created while its watch is down: /validate enforces
#     its max and /mutate applies its default.
# Usage: stale_integration.sh GPUQUOTA KUBE-STANDIN
set -uo pipefail
gq=$1
standin=$2
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/gq-stale-it.XXXXXX)
host=wh.gq-system.svc
source "$root/test/integration_lib.sh"
source "$root/test/standin_lib.sh"
source "$root/test/cluster_lib.sh"

k apply -f "$root/deploy/crds/" >/dev/null || { echo "CRDs not applied"; exit 1; }
for ns in stale-a stale-b stale-c scratch; do k create namespace "$ns" >/dev/null; done
start_gq_webhook
register_gq_webhooks

denied() { echo "admission webhook \"validate.gpuquota.io\" denied the request: $1"; }
# create NS NAME MEMORY: kubectl create of a GPU pod; its output, denials
# without kubectl's prefix.
create() {
    gq_pod "$@" | k create -f - | grep -v '^Warning:' |
        sed 's/^Error from server (Forbidden): error when creating "STDIN": //'
}
failed_watches() { grep -c "kube cache /apis/gpuquota.io/v1alpha1/$1: watch failed" "$work/webhook.log"; }

# stall RESOURCE KIND SPEC: cut the webhook's watch of RESOURCE (an event on
# a scratch object of KIND ends the stream) and answer every reconnect 503;
# returns once a reconnect has failed.
stall() {
    local before
    before=$(failed_watches "$1")
    fault "{\"fail\":{\"count\":1000000,\"code\":503,\"method\":\"GET\",\"pathPrefix\":\"/apis/gpuquota.io/v1alpha1/$1\"}}"
    fault '{"cutWatchAfter":1}'
    k apply -f - >/dev/null <<EOF
apiVersion: gpuquota.io/v1alpha1
kind: $2
metadata: {name: cut, namespace: scratch}
spec: $3
EOF
    fault '{"cutWatchAfter":0}'
    for _ in $(seq 100); do
        (($(failed_watches "$1") > before)) && return 0
        sleep 0.1
    done
    fail "the $1 watch was not cut"
}

# ---------------------------------------------------------------- GPUQuota
stall gpuquotas GPUQuota "{hard: {gpu-memory: 1Gi}}"
k apply -f - >/dev/null <<'EOF'
apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: team, namespace: stale-a}
spec: {hard: {gpu-memory: 8Gi}}
EOF
check "a 12Gi pod over an 8Gi quota made while the watch is down is denied" \
    "$(denied 'exceeded quota: team, requested: gpu-memory=12Gi, used: gpu-memory=0, limited: gpu-memory=8Gi')" \
    "$(create stale-a over 12Gi)"
check "an 8Gi pod fits and is charged" "pod/fits created" "$(create stale-a fits 8Gi)"
check_match "the next pod finds the quota full" \
    'denied the request: exceeded quota: team, requested: gpu-memory=1Gi, used: gpu-memory=8Gi, limited: gpu-memory=8Gi$' \
    "$(create stale-a more 1Gi)"
check "no pod over the quota exists" "pod/fits" "$(k get pods -n stale-a -o name)"
check_match "the watch was down throughout (reconnects refused)" '"faultsInjected":[1-9]' \
    "$(curl -s "$S/standin/stats")"

# ---------------------------------------------------------------- fail closed
# Live reads of gpuquota.io fail as well: nothing tells which quotas govern.
fault '{"fail":{"count":1000000,"code":503,"method":"GET","pathPrefix":"/apis/gpuquota.io/v1alpha1/"}}'
check_match "the live read fails: the GPU pod is denied with the reason" \
    '^admission webhook "validate.gpuquota.io" denied the request: gpuquota could not reach the API server to read the quotas of stale-b: .*503' \
    "$(create stale-b p 1Gi)"
check "a CPU-only pod reads nothing and is created" "pod/cpu created" \
    "$(printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: cpu, namespace: stale-b}\nspec: {containers: [{name: c, image: x}]}\n' | k create -f -)"
curl -s -X POST "$S/standin/reset" >/dev/null

# ---------------------------------------------------------------- GPULimitRange
stall gpulimitranges GPULimitRange "{limits: [{type: Container, max: {gpu-memory: 1Gi}}]}"
limit_range_yaml stale-c limits '[{type: Container, max: {gpu-memory: 4Gi}, default: {gpu-memory: 2Gi}}]' |
    k apply -f - >/dev/null
check "/validate: the max of a GPULimitRange made while its watch is down" \
    "$(denied 'maximum gpu-memory usage per Container is 4Gi, but limit is 8Gi')" \
    "$(create stale-c big 8Gi)"
check "/mutate: its default turns a whole GPU into a 2Gi slice" \
    "pod/one-gpu created gpu-memory=2Gi,gpus=0,gpu-pods=1" \
    "$(printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: one-gpu, namespace: stale-c}\nspec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}\n' |
        k create -f - | grep -v '^Warning:') $(k get pod one-gpu -n stale-c -o jsonpath='{.metadata.annotations.gpuquota\.io/charged}')"
curl -s -X POST "$S/standin/reset" >/dev/null

stop_all webhook.log standin.err
finish
