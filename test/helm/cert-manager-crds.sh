#!/usr/bin/env bash
# Print the folder of cert-manager's CRDs (deploy/crds of its Go module,
# pinned in test/k8s-tools/cert-manager/go.{mod,sum}), downloading the module
# into the Go module cache if needed. (cert-manager's controller and CA
# injector are built from the same module by scripts/k8s-bin.sh.)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
    export PATH=/usr/local/go/bin:$PATH
fi
dir=$(cd "$root/test/k8s-tools/cert-manager" &&
    GOFLAGS=-mod=readonly go mod download -json github.com/cert-manager/cert-manager | jq -r .Dir)
[[ -f $dir/deploy/crds/cert-manager.io_certificates.yaml ]] || {
    echo "cert-manager-crds: no CRDs in $dir" >&2
    exit 1
}
echo "$dir/deploy/crds"
