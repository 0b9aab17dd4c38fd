#!/usr/bin/env bash
# gpuquota installed on a real node as docs/install.md tells an operator:
# its image built from Debian's packages (scripts/build-image.sh), loaded
# into the node's containerd (scripts/real-node.sh load) and named by an
# images: entry of a kustomization over deploy/, which adds only a
# nodeSelector so that gpuquota's pods go to the real node and not to kwok's
# pretend ones; the certificate steps; then the Deployments rolled out.
# Used by test/real_node.sh and make demo-cluster.
#
#   scripts/install-real-node.sh CLUSTER_DIR GPUQUOTA WORKDIR
#
# GQ_IMAGE_TAR names an archive scripts/build-image.sh already made of this
# tree, loaded instead of building the image again.
#
# Needs the control plane of scripts/local-cluster.sh and the node of
# scripts/real-node.sh up in CLUSTER_DIR; KUBECONFIG set to the cluster's.
# Leaves WORKDIR/overlay (kubectl delete -k undoes the install) and
# WORKDIR/gpuquota.tar.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: install-real-node.sh CLUSTER_DIR GPUQUOTA WORKDIR"
cluster=${1:?$usage}
gq=${2:?$usage}
work=${3:?$usage}
ns=gpuquota-system
die() { echo "install-real-node.sh: $*" >&2; exit 1; }
mkdir -p "$work/overlay"

if [[ -n ${GQ_IMAGE_TAR:-} ]]; then
    cp "$GQ_IMAGE_TAR" "$work/gpuquota.tar" || die "no image archive at $GQ_IMAGE_TAR"
else
    GQ_IMAGE_BUILD=$work/image-build "$ROOT/scripts/build-image.sh" "$work/gpuquota.tar" \
        >"$work/image.log" 2>&1 || die "the image does not build: $(tail -3 "$work/image.log")"
fi
"$ROOT/scripts/real-node.sh" load "$cluster" "$work/gpuquota.tar" >"$work/load.log" 2>&1 ||
    die "the image does not load into the node's containerd: $(tail -3 "$work/load.log")"
"$ROOT/scripts/real-node.sh" ctr "$cluster" images tag --force ghcr.io/gpuquota/gpuquota:0.1.0 \
    localhost/gpuquota:e2e >/dev/null

cat >"$work/overlay/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [$(realpath --relative-to="$work/overlay" "$ROOT/deploy")]
# as docs/install.md tells: the image named where it was loaded
images: [{name: ghcr.io/gpuquota/gpuquota, newName: localhost/gpuquota, newTag: e2e}]
patches:
  - patch: |-
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: gpuquota-webhook, namespace: $ns}
      spec: {template: {spec: {nodeSelector: {gpuquota.io/real-node: "true"}}}}
  - patch: |-
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: gpuquota-controller, namespace: $ns}
      spec: {template: {spec: {nodeSelector: {gpuquota.io/real-node: "true"}}}}
YAML
"$gq" certs generate --service gpuquota-webhook --namespace "$ns" --out "$work/certs" >/dev/null
kubectl apply -f "$ROOT/deploy/namespace.yaml" >/dev/null
kubectl -n "$ns" create secret tls gpuquota-webhook-tls \
    --cert "$work/certs/tls.crt" --key "$work/certs/tls.key" >/dev/null
kubectl apply -k "$work/overlay" >"$work/apply.log" 2>&1 ||
    die "kubectl apply -k: $(tail -3 "$work/apply.log")"
"$gq" certs inject --ca "$work/certs/ca.crt" >/dev/null
for d in gpuquota-webhook gpuquota-controller; do
    kubectl -n "$ns" rollout status deployment "$d" --timeout=180s >/dev/null 2>&1 ||
        die "deployment $d is not available: $(kubectl -n "$ns" get pods -o wide 2>&1 | tail -6)"
done
