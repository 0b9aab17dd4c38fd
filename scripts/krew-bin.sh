#!/usr/bin/env bash
# krew (sigs.k8s.io/krew, kubectl's plugin manager), built from its Go module
# pinned in test/krew/tool/go.{mod,sum}, and print its path. It is test
# tooling: the release test installs the release's krew manifest with it
# (test/krew/release.sh). Cached beside the control plane of
# scripts/k8s-bin.sh, keyed by the pin: a second run builds nothing.
#
# Environment: GQ_K8S_CACHE  cache root (default ~/.cache/gpuquota/k8s)
# Usage: scripts/krew-bin.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tool=$root/test/krew/tool
if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
    export PATH=/usr/local/go/bin:$PATH
fi
command -v go >/dev/null 2>&1 || { echo "krew-bin: no Go toolchain on PATH or in /usr/local/go" >&2; exit 1; }
krew=$(sed -n 's|^[[:space:]]*sigs.k8s.io/krew \(v[^ ]*\).*|\1|p' "$tool/go.mod" | head -1)
[[ -n $krew ]] || { echo "krew-bin: no sigs.k8s.io/krew pin in $tool/go.mod" >&2; exit 1; }
sum=$(cat "$tool/go.mod" "$tool/go.sum" | sha256sum | cut -c1-12)
cache_root=${GQ_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuquota/k8s}
dir=$cache_root/krew-$krew-$sum
if [[ ! -x $dir/krew ]]; then
    mkdir -p "$cache_root"
    tmp=$(mktemp -d "$cache_root/.build.XXXXXX")
    echo "krew-bin: building krew $krew" >&2
    if ! (cd "$tool" && go build -ldflags "-s -w -X sigs.k8s.io/krew/internal/version.gitTag=$krew" \
        -o "$tmp/krew" sigs.k8s.io/krew/cmd/krew) >&2; then
        rm -rf "$tmp"
        echo "krew-bin: the build of krew $krew failed" >&2
        exit 1
    fi
    rm -rf "$dir"
    mv "$tmp" "$dir"
fi
echo "$dir/krew"
