#!/usr/bin/env bash
# Print the folder of prometheus-operator's CRDs (example/prometheus-operator-crd
# of its Go module, pinned in test/k8s-tools/prometheus-operator/go.{mod,sum}),
# downloading the module into the Go module cache if needed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
    export PATH=/usr/local/go/bin:$PATH
fi
dir=$(cd "$root/test/k8s-tools/prometheus-operator" &&
    GOFLAGS=-mod=readonly go mod download -json github.com/prometheus-operator/prometheus-operator |
    jq -r .Dir)
crds=$dir/example/prometheus-operator-crd
[[ -f $crds/monitoring.coreos.com_servicemonitors.yaml && -f $crds/monitoring.coreos.com_podmonitors.yaml ]] || {
    echo "prometheus-operator-crds: no CRDs in $crds" >&2
    exit 1
}
echo "$crds"
