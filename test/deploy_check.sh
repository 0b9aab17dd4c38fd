#!/usr/bin/env bash
# The deploy tree renders with kubectl's kustomize, holds every component, and
# the configuration in its ConfigMap passes `gpuquota config check`.
set -euo pipefail
gq=$1
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

kubectl kustomize "$root/deploy" >"$out/all.yaml"
for kind in CustomResourceDefinition Namespace ServiceAccount ClusterRole ClusterRoleBinding Role \
    RoleBinding ConfigMap Deployment Service PodDisruptionBudget MutatingWebhookConfiguration \
    ValidatingWebhookConfiguration NetworkPolicy; do
    grep -q "^kind: $kind\$" "$out/all.yaml" || { echo "deploy: no $kind rendered"; exit 1; }
done
n=$(grep -c '^kind: CustomResourceDefinition$' "$out/all.yaml")
[ "$n" -eq 3 ] || { echo "deploy: expected 3 CRDs, got $n"; exit 1; }
n=$(grep -c '^kind: NetworkPolicy$' "$out/all.yaml")
[ "$n" -eq 2 ] || { echo "deploy: expected NetworkPolicies for webhook and controller, got $n"; exit 1; }

# The block scalar under `config.yaml: |` in deploy/config.yaml, dedented.
awk '/^  config.yaml: \|/ {on=1; next} on && /^    / {print substr($0, 5); next} on && !/^$/ {on=0}' \
    "$root/deploy/config.yaml" >"$out/config.yaml"
[ -s "$out/config.yaml" ] || { echo "deploy: no config.yaml in the ConfigMap"; exit 1; }
"$gq" config check "$out/config.yaml"
echo "deploy: ok"
