#!/usr/bin/env bash
# kubectl gpuquota, found on PATH by real kubectl as a user installs it (the
# kubectl-gpuquota symlink of `make install`): top and explain against the
# real control plane, with kubectl's flags, as an admin and as a namespace
# user bound to the built-in edit role.
source "$ROOT/test/e2e/lib.sh"
bin=$(mktemp -d)
trap 'kubectl delete namespace e2e-pa e2e-pb e2e-pc --wait=false >/dev/null 2>&1
      kubectl delete gputenantquota e2e-pt --ignore-not-found >/dev/null 2>&1
      rm -rf "$bin"' EXIT
ln -s "$GQ" "$bin/kubectl-gpuquota"
export PATH=$bin:$PATH

check_match "kubectl finds the plugin on PATH" "$bin/kubectl-gpuquota" "$(kubectl plugin list 2>&1)"
check_match "kubectl gpuquota runs the plugin under its name" "^usage: kubectl gpuquota COMMAND" \
    "$(kubectl gpuquota --help)"

ns e2e-pa
ns e2e-pb team=pt
quota e2e-pa team '{gpu-memory: 20Gi, gpu-pods: 5}'
quota e2e-pb small '{gpu-memory: 8Gi}'
kubectl apply -f - >/dev/null <<'EOF'
apiVersion: gpuquota.io/v1alpha1
kind: GPUTenantQuota
metadata: {name: e2e-pt}
spec:
  namespaces: [e2e-pa]
  namespaceSelector: {matchLabels: {team: pt}}
  hard: {gpu-memory: 64Gi}
EOF
gpu_pod a 16Gi | kubectl -n e2e-pa create -f - >/dev/null 2>&1
gpu_pod b 2Gi | kubectl -n e2e-pb create -f - >/dev/null 2>&1
# The controller recounts both quotas and the tenant from the pods.
counted() {
    [[ $(used e2e-pa team gpu-memory) == 16Gi && $(used e2e-pb small gpu-memory) == 2Gi &&
        $(kubectl get gtq e2e-pt -o 'jsonpath={.status.used.gpu-memory}') == 18Gi ]]
}
eventually 30 counted || fail "the controller did not count the pods"

# ------------------------------------------------------------------- top
out=$(kubectl gpuquota top -n e2e-pa)
check_match "top shows the namespace's quota with a bar" \
    'namespace e2e-pa/team +gpu-memory +16Gi +0 +- +20Gi +\[################\.\.\.\.\] +80%' "$out"
check_match "top shows gpu-pods" 'gpu-pods +1 +0 +- +5 +\[####\.+\] +20%' "$out"
check_match "top shows the tenant covering the namespace" \
    'tenant +e2e-pt +gpu-memory +18Gi +0 +- +64Gi' "$out"
check_match "top breaks the tenant down by namespace" 'namespace e2e-pb: gpu-memory=2Gi' "$out"
[[ $out != *e2e-pb/small* ]] && pass "-n leaves other namespaces' quotas out" ||
    fail "-n shows e2e-pb/small: $out"
out=$(kubectl gpuquota top -A)
check_match "-A shows every namespace" 'e2e-pa/team.*'$'\n''(.*'$'\n'')*namespace e2e-pb/small' "$out"
json=$(kubectl gpuquota top -n e2e-pa -o json)
check "-o json carries the numbers" "17179869184 21474836480 80" \
    "$(jq -r '.quotas[0].resources[0] | "\(.usedValue) \(.hardValue) \(.percent)"' <<<"$json")"
yaml=$(kubectl gpuquota top -n e2e-pa -o yaml)
check "-o yaml is the same document" "$(jq -cS . <<<"$json")" \
    "$(python3 -c 'import json,sys,yaml; print(json.dumps(yaml.safe_load(sys.stdin), sort_keys=True, separators=(",",":")))' <<<"$yaml")"
out=$(kubectl gpuquota top -n e2e-pa -o xml 2>&1)
check "an unknown output format is refused" "2" "$(kubectl gpuquota top -o xml >/dev/null 2>&1; echo $?)"
check_match "naming the formats there are" '-o xml: one of table, json, yaml' "$out"

# kubectl's flags: --kubeconfig and --context choose the cluster and the
# context's namespace is the default one.
kc=$bin/kubeconfig
cp "$KUBECONFIG" "$kc"
kubectl --kubeconfig "$kc" config set-context plugin-ctx --cluster "$(kubectl config view -o jsonpath='{.contexts[0].context.cluster}')" \
    --user "$(kubectl config view -o jsonpath='{.contexts[0].context.user}')" --namespace e2e-pb >/dev/null
check_match "--context picks the context and its namespace" 'namespace e2e-pb/small +gpu-memory +2Gi' \
    "$(KUBECONFIG=/nonexistent kubectl gpuquota top --kubeconfig "$kc" --context plugin-ctx)"
check_match "KUBECONFIG is honoured like kubectl does" 'namespace e2e-pb/small' \
    "$(KUBECONFIG=$kc kubectl gpuquota top --context=plugin-ctx)"
check_match "a namespace that is no namespace name never reaches an API path" \
    'namespace "a/../b" is not a valid namespace name' "$(kubectl gpuquota top -n 'a/../b' 2>&1)"
out=$(kubectl gpuquota top --kubeconfig "$kc" --context nope 2>&1)
check_match "an unknown context is an error" 'context "nope"' "$out"

# --------------------------------------------------------------- explain
gpu_pod c 8Gi >"$bin/c.yaml"
out=$(kubectl gpuquota explain -f "$bin/c.yaml" -n e2e-pa)
check "explain exits 1 for a pod that would be refused" "1" "$?"
check_match "explain prices the pod" 'Cost: +gpu-memory=8Gi gpus=0 gpu-pods=1' "$out"
check_match "explain names the quota and what is exceeded" \
    'gpu-memory +in use 16Gi +\+ this pod 8Gi +of hard 20Gi +EXCEEDED' "$out"
check_match "explain names the tenant, which has room" \
    'GPUTenantQuota e2e-pt'$'\n''    gpu-memory +in use 18Gi +\+ this pod 8Gi +of hard 64Gi +fits' "$out"
check_match "the refusal is the webhook's own, from a server dry run" \
    'admission webhook "validate.gpuquota.io" denied the request: exceeded quota: team, requested: gpu-memory=8Gi, used: gpu-memory=16Gi, limited: gpu-memory=20Gi' \
    "$out"
check_match "explain says how much may be asked" \
    'ask for at most 4Gi of gpu-memory \(GPUQuota e2e-pa/team has 4Gi left of 20Gi\)' "$out"
check_match "or how much to free" 'free 4Gi of gpu-memory in GPUQuota e2e-pa/team' "$out"
gpu_pod d 4Gi >"$bin/d.yaml"
out=$(kubectl gpuquota explain -f "$bin/d.yaml" -n e2e-pa -o json)
check "a fitting pod would be admitted (exit 0)" "0" "$?"
check "the dry run's stored pod is priced" "true 4Gi" "$(jq -r '"\(.admitted) \(.cost."gpu-memory")"' <<<"$out")"
check "explain creates nothing" "NotFound" \
    "$(kubectl -n e2e-pa get pod d 2>&1 | grep -o NotFound)"
check "and charges nothing" "16Gi 0" "$(used e2e-pa team gpu-memory) $(reservations e2e-pa team)"

# The pod's namespace is used unless -n says another, as kubectl does.
gpu_pod e 4Gi "  namespace: e2e-pb" >"$bin/e.yaml"
check_match "the pod's own namespace is used" 'Pod: +e2e-pb/e' \
    "$(kubectl gpuquota explain -f "$bin/e.yaml")"
check_match "a different -n is refused with kubectl's words" \
    'the namespace from the provided object "e2e-pb" does not match the namespace "e2e-pa"' \
    "$(kubectl gpuquota explain -f "$bin/e.yaml" -n e2e-pa 2>&1)"

# GPULimitRange: a container over max, a model outside allowedModels.
limit_range e2e-pb limits '[{type: Container, max: {gpu-memory: 6Gi}, allowedModels: [a100-80gb, h100-80gb]}]'
gpu_pod f 7Gi "  annotations: {gpuquota.io/gpu-model: a10}" >"$bin/f.yaml"
lr_seen() { [[ $(kubectl -n e2e-pb create --dry-run=server -f "$bin/f.yaml" 2>&1) == *'maximum gpu-memory'* ]]; }
eventually 15 lr_seen || fail "the webhook did not see the GPULimitRange"
out=$(kubectl gpuquota explain -f "$bin/f.yaml" -n e2e-pb)
check_match "explain shows the limit range" 'GPULimitRange e2e-pb/limits'$'\n''    Container +max 6Gi allowedModels a100-80gb,h100-80gb' "$out"
check_match "and the webhook's limit-range refusal" 'maximum gpu-memory usage per Container is 6Gi, but limit is 7Gi' "$out"
check_match "explain suggests the largest allowed request" \
    'ask for at most 6Gi of gpu-memory in container main \(it asks 7Gi; GPULimitRange limits\)' "$out"
check_match "explain suggests an allowed model" \
    'pick an allowed GPU model with annotation gpuquota.io/gpu-model: a100-80gb, h100-80gb' "$out"

# A whole GPU that a GPULimitRange default turns into a slice is priced as
# that slice, as the mutating webhook rewrites it, also when it is refused.
ns e2e-pc
quota e2e-pc small '{gpu-memory: 8Gi}'
limit_range e2e-pc slices '[{type: Container, default: {gpu-memory: 10Gi}}]'
pod_yaml g 'nvidia.com/gpu: "1"' "  annotations: {gpuquota.io/gpu-model: a100-80gb}" >"$bin/g.yaml"
sliced() { [[ $(kubectl -n e2e-pc create --dry-run=server -f "$bin/g.yaml" 2>&1) == *'requested: gpu-memory=10Gi'* ]]; }
eventually 15 sliced || fail "the webhook did not apply the default slice"
out=$(kubectl gpuquota explain -f "$bin/g.yaml" -n e2e-pc)
check_match "a refused whole GPU is priced as the limit range's default slice" \
    'Cost: +gpu-memory=10Gi gpus=0 gpu-pods=1 \(model a100-80gb, pinned\)' "$out"
check_match "and the suggestion follows from that price" 'ask for at most 8Gi of gpu-memory' "$out"

# ------------------------------------------------- as a namespace user
# A user bound to the built-in edit role in e2e-pa alone: the GPU quota
# objects are readable through the view aggregation of deploy/, the
# configuration through its config reader, tenants are not.
kubectl -n e2e-pa create serviceaccount dev >/dev/null
kubectl -n e2e-pa create rolebinding dev-edit --clusterrole edit --serviceaccount e2e-pa:dev >/dev/null
token=$(kubectl -n e2e-pa create token dev)
ukc=$bin/user.kubeconfig
cp "$kc" "$ukc"
kubectl --kubeconfig "$ukc" config set-credentials dev --token "$token" >/dev/null
kubectl --kubeconfig "$ukc" config set-context dev --cluster "$(kubectl config view -o jsonpath='{.contexts[0].context.cluster}')" \
    --user dev --namespace e2e-pa >/dev/null
can_read() { kubectl --kubeconfig "$ukc" --context dev get gpuquotas; }
eventually 30 can_read || fail "edit does not include reading GPUQuotas"
out=$(kubectl gpuquota top --kubeconfig "$ukc" --context dev 2>&1)
check_match "a namespace user sees the namespace's quota" 'namespace e2e-pa/team +gpu-memory +16Gi' "$out"
check_match "and is told that tenants were left out" 'tenants left out: .*forbidden' "$out"
out=$(kubectl gpuquota explain --kubeconfig "$ukc" --context dev -f "$bin/c.yaml" 2>&1)
check_match "a namespace user gets the refusal explained" 'ask for at most 4Gi of gpu-memory' "$out"
check_match "priced with the cluster's configuration" 'Config: +configmap gpuquota-system/gpuquota-config' "$out"
finish
