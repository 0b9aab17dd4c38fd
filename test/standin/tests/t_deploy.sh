#!/usr/bin/env bash
# The project's own manifests (deploy/) against the stand-in with kubectl:
# kustomize apply, idempotent re-apply, the real CRDs' printer columns and
# the webhook configurations' namespace selector and failurePolicy.
. "$(dirname "$0")/lib.sh"
SRC=${SRC:?source directory}
standin_start
K() { timeout 60 kubectl "$@" 2>&1; }

OUT=$(K apply -k "$SRC/deploy")
expect_eq "apply -k deploy: every object created" "$(grep -c '^kind:' "$SRC"/deploy/{crds/gpuquota.io_*.yaml,namespace.yaml,rbac.yaml,rbac-users.yaml,config.yaml,priority-quota.yaml,webhook.yaml,controller.yaml,webhooks.yaml,networkpolicy.yaml} | awk -F: '{s+=$2} END {print s}')" "$(printf '%s\n' "$OUT" | grep -c ' created$')"
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
# (The stand-in does not evaluate matchConditions: it would call them for a
# CPU pod too, which kube-apiserver does not; so the probe asks for a GPU.)
GPU='{"spec":{"containers":[{"name":"p","image":"i","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}'
expect_match "webhook required" 'Internal error occurred: failed calling webhook "[a-z.]+gpuquota.io"' "$(K run p --image=i -n team-a --overrides="$GPU")"
# gpuquota-system is excluded by the namespaceSelector.
expect_eq "excluded namespace" 'pod/p created' "$(K run p --image=i -n gpuquota-system)"

# kube-apiserver refuses a schema node with both properties and
# additionalProperties; the stand-in says so in the same words.
OUT=$(K apply -f - <<'CRD'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: things, singular: thing, kind: Thing}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            additionalProperties: false
            properties: {size: {type: string}}
CRD
)
expect_match "a CRD with properties beside additionalProperties is refused" \
    'spec.versions\[0\].schema.openAPIV3Schema.properties\[spec\].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive' "$OUT"

finish
