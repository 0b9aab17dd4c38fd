#!/usr/bin/env bash
# The project's own manifests (deploy/) against the stand-in with kubectl:
# kustomize apply, idempotent re-apply, the real CRDs' printer columns and
# the webhook configurations' namespace selector and failurePolicy.
. "$(dirname "$0")/lib.sh"
SRC=${SRC:?source directory}
standin_start
K() { timeout 60 kubectl "$@" 2>&1; }

OUT=$(K apply -k "$SRC/deploy")
expect_eq "apply -k deploy: every object created" "$(grep -c '^kind:' "$SRC"/deploy/{crds/gpuquota.io_*.yaml,namespace.yaml,rbac.yaml,config.yaml,webhook.yaml,controller.yaml,webhooks.yaml,networkpolicy.yaml} | awk -F: '{s+=$2} END {print s}')" "$(printf '%s\n' "$OUT" | grep -c ' created$')"
OUT=$(K apply -k "$SRC/deploy")
# kubectl always re-sends a PodDisruptionBudget's selector (patchStrategy
# replace), so those two report "configured" against kube-apiserver too.
expect_eq "re-apply changes nothing" "" "$(printf '%s\n' "$OUT" | grep -v ' unchanged$' | grep -v '^poddisruptionbudget.policy/.* configured$')"
expect_eq "CRDs established" 3 "$(K wait --for condition=established crd --all --timeout=10s | grep -c 'condition met')"

K create ns team-a >/dev/null
OUT=$(K apply -f "$SRC/deploy/examples/quotas/")
expect_eq "example quotas" 0 "$(printf '%s\n' "$OUT" | grep -vc ' created$')"
expect_match "GPUQuota printer columns" '^NAME +' "$(K get gq -n team-a | head -1)"
expect_eq "GPUQuota rows" "$(grep -c '^kind: GPUQuota$' "$SRC/deploy/examples/quotas/gpuquota.yaml")" "$(K get gq -n team-a --no-headers | wc -l)"

# Pods in team-a go through the gpuquota webhooks (failurePolicy Fail); with
# no webhook running, creation fails the way kube-apiserver fails it.
expect_match "webhook required" 'Internal error occurred: failed calling webhook "[a-z.]+gpuquota.io"' "$(K run p --image=i -n team-a)"
# gpuquota-system is excluded by the namespaceSelector.
expect_eq "excluded namespace" 'pod/p created' "$(K run p --image=i -n gpuquota-system)"

finish
