#!/usr/bin/env bash
# Build Kueue's manager (sigs.k8s.io/kueue cmd/kueue), the queueing system
# scripts/bench-kueue.sh measures gpuquota's queue against, and print the
# folder that holds it. Test tooling, like scripts/k8s-bin.sh: built from
# Kueue's own Go module as the module proxy serves it; nothing of it is linked
# into gpuquota or kept in this repository. Its CRDs are read at run time from
# the module's folder in the Go module cache, which this script also prints
# (second line).
#
# The cache folder is keyed by the version: a second run builds nothing.
# Environment: GQ_KUEUE_VERSION  module version (default v0.17.0)
#              GQ_KUEUE_CACHE    cache root (default ~/.cache/gpuquota/kueue)
# Usage: scripts/kueue-bin.sh [--quiet]
#        scripts/kueue-bin.sh --cached   print only if built already (exit 1 otherwise)
# Output: line 1 the folder holding `kueue`, line 2 the module's source folder.
set -euo pipefail
quiet=${1:-}
log() { [[ $quiet == --quiet ]] || echo "kueue-bin: $*" >&2; }
version=${GQ_KUEUE_VERSION:-v0.17.0}
cache_root=${GQ_KUEUE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuquota/kueue}
dir=$cache_root/$version

if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
    export PATH=/usr/local/go/bin:$PATH
fi
if ! command -v go >/dev/null 2>&1; then
    echo "kueue-bin: no Go toolchain on PATH or in /usr/local/go" >&2
    exit 1
fi
# Kueue's go.mod names the Go it needs; a machine's older Go fetches that
# toolchain from the module proxy itself (GOTOOLCHAIN=auto).
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}

# The module's source folder, from the module cache (downloaded if missing).
src() {
    (cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kueue@$version" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
}

if [[ -x $dir/kueue && -f $dir/src ]]; then
    echo "$dir"
    cat "$dir/src"
    exit 0
fi
[[ $quiet != --cached ]] || exit 1

mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
flock 9
if [[ ! -x $dir/kueue ]]; then
    tmp=$(mktemp -d "$cache_root/.build.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    started=$(date +%s)
    log "building Kueue $version (cmd/kueue)"
    # go install with a version builds the module exactly as its go.mod and
    # go.sum pin it, outside any project.
    GOBIN=$tmp CGO_ENABLED=0 GOFLAGS="-buildvcs=false -trimpath" \
        go install -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$version" \
        "sigs.k8s.io/kueue/cmd/kueue@$version"
    log "built in $(($(date +%s) - started)) s"
    rm -rf "$dir"
    mv "$tmp" "$dir"
    trap - EXIT
fi
src >"$dir/src"
[[ -d $(cat "$dir/src")/config/components/crd/bases ]] ||
    { echo "kueue-bin: no CRDs under $(cat "$dir/src")" >&2; exit 1; }
echo "$dir"
cat "$dir/src"
