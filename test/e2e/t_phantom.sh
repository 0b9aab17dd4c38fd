#!/usr/bin/env bash
# A pod charged by /validate and then refused by a later admission step
# (here kube-apiserver's own ResourceQuota on CPU, which runs after the
# webhooks) never exists: its reservation must be dropped soon after the
# longest possible admission, not kept for the whole reservation TTL. That
# bound is read from the cluster: the longest timeout of the other
# validating webhooks that see pod creates (none here), plus 5 s. Before, a
# fixed 35 s let a tenant with edit keep a shared tenant quota full of such
# phantoms by re-sending refused creates every few seconds. The refused
# creates are the tenant's.
source "$ROOT/test/e2e/lib.sh"
TKC=$(mktemp)
trap 'kubectl delete namespace e2e-phantom --wait=false >/dev/null 2>&1; rm -f "$TKC"' EXIT
ns e2e-phantom
tenant_kubeconfig e2e-phantom tenant "$TKC" || fail "tenant kubeconfig"
tk() { kubectl --kubeconfig "$TKC" -n e2e-phantom "$@"; }
quota e2e-phantom team '{gpu-memory: 20Gi}'
kubectl -n e2e-phantom create quota cpu --hard=requests.cpu=1 >/dev/null
eventually 15 bash -c "[[ -n \$(kubectl -n e2e-phantom get resourcequota cpu -o jsonpath='{.status.hard.requests\\.cpu}') ]]"

pod() { pod_yaml "$1" "gpuquota.io/gpu-memory: \"$2\", cpu: \"$3\""; }
out=$(pod big-cpu 16Gi 2 | tk create -f - 2>&1)
check_match "native ResourceQuota refuses the pod after gpuquota charged it" \
    'exceeded quota: cpu, requested: requests.cpu=2' "$out"
check "the refused pod does not exist" "NotFound" \
    "$(kubectl -n e2e-phantom get pod big-cpu 2>&1 | grep -o NotFound)"
refused_at=$SECONDS
check "its reservation is held at first" 1 "$(reservations e2e-phantom team)"
check_match "so a second pod cannot use the phantom's charge yet" 'exceeded quota: team' \
    "$(pod fits 16Gi 500m | tk create -f - 2>&1)"
if eventually 60 bash -c "[[ \$(kubectl -n e2e-phantom get gq team -o json | jq '.status.reservations // [] | length') == 0 ]]"; then
    took=$((SECONDS - refused_at))
    echo "# the phantom reservation was dropped $took s after the refusal (TTL 120 s)"
    check_match "within the cluster's admission bound (5 s here) and a recount, not after 35 s" \
        '^([0-9]|1[0-9])$' "$took"
else
    fail "the phantom reservation is still held after 60 s"
fi
check_match "and the quota has room again" "created" \
    "$(pod fits 16Gi 500m | tk create -f - 2>&1)"
eventually 15 bash -c "[[ \$(kubectl -n e2e-phantom get gq team -o jsonpath='{.status.used.gpu-memory}') == 16Gi ]]"
check "the real pod is counted once" "16Gi" "$(used e2e-phantom team gpu-memory)"
finish
