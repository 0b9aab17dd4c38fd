#!/usr/bin/env bash
# Workload controllers meeting the quota, as users see it:
#   - a Deployment of 3 pods of 8Gi under a quota that fits 2: 2 pods exist,
#     the ReplicaSet records a FailedCreate event carrying the exceeded-quota
#     message; raising the quota's hard lets the ReplicaSet controller's
#     retry create the third;
#   - a Job whose pod does not fit: FailedCreate event on the Job, no pod;
#     once the quota is raised, the Job controller's retry creates the pod,
#     kwok completes it and the Job completes.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

NSD=e2e-wl-deploy NSJ=e2e-wl-job
cleanup() { kubectl delete namespace "$NSD" "$NSJ" --ignore-not-found --wait=true --timeout=120s >/dev/null; }
trap cleanup EXIT

now_ms() { date +%s%3N; }
npods() { kubectl -n "$1" get pods --no-headers 2>/dev/null | grep -c .; }
npods_is() { [[ $(npods "$1") == "$2" ]]; }
# events NS KIND NAME REASON: the messages of the events of that reason on that object.
events() {
    kubectl -n "$1" get events -o json |
        jq -r --arg k "$2" --arg n "$3" --arg r "$4" \
            '.items[] | select(.involvedObject.kind == $k and .involvedObject.name == $n and .reason == $r) | .message'
}
has_event() { [[ -n $(events "$@") ]]; }
used_is() { [[ $(used "$1" "$2" "$3") == "$4" ]]; }

ns "$NSD" || { fail "namespace $NSD"; finish; }
ns "$NSJ" || { fail "namespace $NSJ"; finish; }

# ---------------------------------------------------------------- Deployment
quota "$NSD" team '{gpu-memory: 16Gi, gpu-pods: 10}'
kubectl -n "$NSD" create -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer}
spec:
  replicas: 3
  selector: {matchLabels: {app: trainer}}
  template:
    metadata: {labels: {app: trainer}}
    spec:
$(containers 'gpuquota.io/gpu-memory: 8Gi' '      ')
EOF
check "Deployment trainer created" 0 $?
rsname() { kubectl -n "$NSD" get rs -l app=trainer -o jsonpath='{.items[0].metadata.name}' 2>/dev/null; }
eventually 60 rsname
rs=$(rsname)
check_match "ReplicaSet of trainer" '^trainer-' "$rs"
eventually 60 has_event "$NSD" ReplicaSet "$rs" FailedCreate
msg=$(events "$NSD" ReplicaSet "$rs" FailedCreate | head -1)
check_match "FailedCreate on the ReplicaSet carries the exceeded-quota denial" \
    '^Error creating: admission webhook "validate\.gpuquota\.io" denied the request: exceeded quota: team, requested: gpu-memory=8Gi, used: gpu-memory=16Gi, limited: gpu-memory=16Gi$' "$msg"
check "pods of trainer" 2 "$(npods "$NSD")"
eventually 30 used_is "$NSD" team gpu-memory 16Gi
check "used gpu-memory with 2 pods" 16Gi "$(used "$NSD" team gpu-memory)"
replicas_is() { [[ $(kubectl -n "$NSD" get deploy trainer -o jsonpath='{.status.replicas}') == "$1" ]]; }
eventually 30 replicas_is 2
check "Deployment reports 2 replicas of 3" 2 "$(kubectl -n "$NSD" get deploy trainer -o jsonpath='{.status.replicas}')"
check "pods of trainer, still" 2 "$(npods "$NSD")"

t0=$(now_ms)
kubectl -n "$NSD" patch gpuquota team --type=merge -p '{"spec":{"hard":{"gpu-memory":"24Gi"}}}' >/dev/null
check "quota raised to 24Gi" 0 $?
if eventually 90 npods_is "$NSD" 3; then
    pass "the ReplicaSet created the third pod $(($(now_ms) - t0)) ms after the quota was raised"
fi
check "pods of trainer after the raise" 3 "$(npods "$NSD")"
avail() { [[ $(kubectl -n "$NSD" get deploy trainer -o jsonpath='{.status.availableReplicas}') == 3 ]]; }
eventually 60 avail
check "Deployment available 3/3" 3 "$(kubectl -n "$NSD" get deploy trainer -o jsonpath='{.status.availableReplicas}')"
eventually 30 used_is "$NSD" team gpu-memory 24Gi
check "used gpu-memory with 3 pods" 24Gi "$(used "$NSD" team gpu-memory)"
check "every trainer pod is managed" "true true true" \
    "$(kubectl -n "$NSD" get pods -l app=trainer -o jsonpath='{.items[*].metadata.labels.gpuquota\.io/managed}')"

# ---------------------------------------------------------------- Job
quota "$NSJ" team '{gpu-memory: 4Gi, gpu-pods: 10}'
kubectl -n "$NSJ" create -f - >/dev/null <<EOF
apiVersion: batch/v1
kind: Job
metadata: {name: finetune}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
$(containers 'gpuquota.io/gpu-memory: 8Gi' '      ')
EOF
check "Job finetune created" 0 $?
eventually 60 has_event "$NSJ" Job finetune FailedCreate
msg=$(events "$NSJ" Job finetune FailedCreate | head -1)
check_match "FailedCreate on the Job carries the exceeded-quota denial" \
    '^Error creating: admission webhook "validate\.gpuquota\.io" denied the request: exceeded quota: team, requested: gpu-memory=8Gi, used: gpu-memory=0, limited: gpu-memory=4Gi$' "$msg"
check "pods of finetune" 0 "$(npods "$NSJ")"
check "Job not complete" "" "$(kubectl -n "$NSJ" get job finetune -o jsonpath='{.status.succeeded}')"

t0=$(now_ms)
kubectl -n "$NSJ" patch gpuquota team --type=merge -p '{"spec":{"hard":{"gpu-memory":"8Gi"}}}' >/dev/null
check "quota raised to 8Gi" 0 $?
complete() {
    [[ $(kubectl -n "$NSJ" get job finetune -o jsonpath='{.status.conditions[?(@.type=="Complete")].status}') == True ]]
}
if eventually 120 complete; then
    pass "Job finetune completed $(($(now_ms) - t0)) ms after the quota was raised"
fi
check "Job finetune Complete" True "$(kubectl -n "$NSJ" get job finetune -o jsonpath='{.status.conditions[?(@.type=="Complete")].status}')"
check "Job finetune succeeded once" 1 "$(kubectl -n "$NSJ" get job finetune -o jsonpath='{.status.succeeded}')"
check "Job's pod Succeeded" Succeeded "$(kubectl -n "$NSJ" get pods -l job-name=finetune -o jsonpath='{.items[*].status.phase}')"
eventually 30 used_is "$NSJ" team gpu-memory 0
check "used gpu-memory after the Job completed" 0 "$(used "$NSJ" team gpu-memory)"

finish
