#!/usr/bin/env bash
# Build the real Kubernetes control plane that the e2e suite and
# `make demo-cluster` run gpuquota against, and print the folder that holds it:
#   kube-apiserver kube-controller-manager kube-scheduler kubectl  (k8s.io/kubernetes)
#   etcd                                                            (go.etcd.io/etcd/server/v3)
#   kwok                                                            (sigs.k8s.io/kwok)
#   helm                                                            (helm.sh/helm/v3)
#   kubelet kube-proxy  (k8s.io/kubernetes, test/k8s-tools/node: the real node
#                        of scripts/real-node.sh)
#   cert-manager-controller cert-manager-cainjector  (github.com/cert-manager/cert-manager,
#                                                     test/k8s-tools/cert-manager/*/main.go)
# They are test tooling, built from their own Go modules pinned in
# test/k8s-tools/*/go.{mod,sum}; nothing of them is linked into gpuquota.
#
# The folder is a cache keyed by those pins: a second run builds nothing.
# helm and cert-manager have cache folders of their own keyed by their pins (a
# new helm pin rebuilds helm only) and are linked into the printed folder.
# cert-manager's module needs Go 1.26: with an older Go it is left out (the
# chart's cert-manager test then says so) and the rest is built.
# Binaries found in $KUBEBUILDER_ASSETS (setup-envtest's layout: etcd,
# kube-apiserver, kubectl) are used instead of building them; the rest is
# still built.
#
# Environment: GQ_K8S_CACHE  cache root (default ~/.cache/gpuquota/k8s)
# Usage: scripts/k8s-bin.sh [--quiet]
#        scripts/k8s-bin.sh --cached   print the folder only if it is built
#                                      already (exit 1 otherwise); builds nothing
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools=$root/test/k8s-tools
quiet=${1:-}
log() { [[ $quiet == --quiet ]] || echo "k8s-bin: $*" >&2; }

# Go 1.24 or later: the modules' go.mod files need it. A fresh machine of the
# project's kind has it in /usr/local/go; Debian's golang package is too old.
if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
    export PATH=/usr/local/go/bin:$PATH
fi
if ! command -v go >/dev/null 2>&1; then
    echo "k8s-bin: no Go toolchain (1.24 or later) on PATH or in /usr/local/go" >&2
    exit 1
fi
gover=$(go env GOVERSION | sed 's/^go//')
if [[ $(printf '%s\n1.24\n' "${gover%%-*}" | sort -V | head -1) != 1.24 ]]; then
    echo "k8s-bin: Go $gover is too old; the control plane's modules need Go 1.24 or later" >&2
    exit 1
fi

pin() { sed -n "s|^[[:space:]]*\(require \)\{0,1\}$1 \(v[^ ]*\).*|\2|p" "$2" | head -1; }
k8s=$(pin k8s.io/kubernetes "$tools/kube/go.mod")
etcd=$(pin go.etcd.io/etcd/server/v3 "$tools/kube/go.mod")
kwok=$(pin sigs.k8s.io/kwok "$tools/kwok/go.mod")
sum=$(cat "$tools"/{kube,kwok}/go.mod "$tools"/{kube,kwok}/go.sum "$tools"/kube/etcd/main.go | sha256sum | cut -c1-12)
helm=$(pin helm.sh/helm/v3 "$tools/helm/go.mod")
helm_sum=$(cat "$tools"/helm/go.mod "$tools"/helm/go.sum | sha256sum | cut -c1-12)
cache_root=${GQ_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuquota/k8s}
dir=$cache_root/k8s-$k8s-etcd-$etcd-kwok-$kwok-$sum
helm_dir=$cache_root/helm-$helm-$helm_sum
cm=$(pin github.com/cert-manager/cert-manager "$tools/cert-manager/go.mod")
cm_sum=$(cat "$tools"/cert-manager/go.mod "$tools"/cert-manager/go.sum "$tools"/cert-manager/*/main.go |
    sha256sum | cut -c1-12)
cm_dir=$cache_root/cert-manager-$cm-$cm_sum
node_k8s=$(pin k8s.io/kubernetes "$tools/node/go.mod")
node_sum=$(cat "$tools"/node/go.mod "$tools"/node/go.sum | sha256sum | cut -c1-12)
node_dir=$cache_root/node-$node_k8s-$node_sum
all=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)

complete() {
    local b
    for b in "${all[@]}"; do [[ -x $dir/$b ]] || return 1; done
}

if [[ $quiet == --cached ]]; then
    complete || exit 1
    echo "$dir"
    exit 0
fi

mkdir -p "$cache_root"
# One build at a time per cache (ctest may start several e2e fixtures).
exec 9>"$cache_root/.lock"
flock 9
# A module cache and proxy settings of the user's own are respected; the
# builds are reproducible from go.sum and never edit the go.mod files.
export GOFLAGS="-mod=readonly -buildvcs=false -trimpath"
export CGO_ENABLED=0
ldflags="-s -w"

build_helm() {
    [[ -x $helm_dir/helm ]] && return 0
    local htmp started
    htmp=$(mktemp -d "$cache_root/.build.XXXXXX")
    started=$(date +%s)
    log "building helm $helm"
    # As helm's own Makefile does: the Kubernetes version it assumes offline
    # (helm lint, helm template) is the one of the client-go it links.
    local cg minor hflags p
    cg=$(pin k8s.io/client-go "$tools/helm/go.mod")
    minor=$(echo "$cg" | cut -d. -f2)
    hflags="-X helm.sh/helm/v3/internal/version.version=$helm -X helm.sh/helm/v3/internal/version.metadata="
    for p in pkg/lint/rules pkg/chartutil; do
        hflags+=" -X helm.sh/helm/v3/$p.k8sVersionMajor=1 -X helm.sh/helm/v3/$p.k8sVersionMinor=$minor"
    done
    if ! (cd "$tools/helm" && go build -ldflags "$ldflags $hflags" -o "$htmp/helm" helm.sh/helm/v3/cmd/helm); then
        rm -rf "$htmp"
        return 1
    fi
    log "built helm in $(($(date +%s) - started)) s"
    rm -rf "$helm_dir"
    mv "$htmp" "$helm_dir"
}
link_helm() {
    build_helm
    ln -sfn "$helm_dir/helm" "$dir/helm"
}

# cert-manager's controller and cainjector, wired from its pkg/ by
# test/k8s-tools/cert-manager/{controller,cainjector}/main.go.
build_cert_manager() {
    [[ -x $cm_dir/cert-manager-controller && -x $cm_dir/cert-manager-cainjector ]] && return 0
    if [[ $(printf '%s\n1.26\n' "${gover%%-*}" | sort -V | head -1) != 1.26 ]]; then
        log "Go $gover is too old for cert-manager $cm (1.26 or later); it is not built"
        return 0
    fi
    local ctmp started c
    ctmp=$(mktemp -d "$cache_root/.build.XXXXXX")
    started=$(date +%s)
    log "building cert-manager $cm: controller, cainjector"
    for c in controller cainjector; do
        if ! (cd "$tools/cert-manager" && go build -ldflags "$ldflags" -o "$ctmp/cert-manager-$c" "./$c"); then
            rm -rf "$ctmp"
            return 1
        fi
    done
    log "built cert-manager in $(($(date +%s) - started)) s"
    rm -rf "$cm_dir"
    mv "$ctmp" "$cm_dir"
}
link_cert_manager() {
    local c
    build_cert_manager
    for c in controller cainjector; do
        [[ ! -x $cm_dir/cert-manager-$c ]] || ln -sfn "$cm_dir/cert-manager-$c" "$dir/cert-manager-$c"
    done
}

# kubelet and kube-proxy, for the real node (scripts/real-node.sh), from
# their own module: the control plane's pins, with the sums their extra
# packages need.
build_node() {
    [[ -x $node_dir/kubelet && -x $node_dir/kube-proxy ]] && return 0
    local ntmp started
    ntmp=$(mktemp -d "$cache_root/.build.XXXXXX")
    started=$(date +%s)
    log "building Kubernetes $node_k8s: kubelet, kube-proxy"
    if ! (cd "$tools/node" && go build -ldflags "$ldflags -X k8s.io/component-base/version.gitVersion=$node_k8s" \
        -o "$ntmp/" k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy); then
        rm -rf "$ntmp"
        return 1
    fi
    log "built kubelet and kube-proxy in $(($(date +%s) - started)) s"
    rm -rf "$node_dir"
    mv "$ntmp" "$node_dir"
}
link_node() {
    local b
    build_node
    for b in kubelet kube-proxy; do ln -sfn "$node_dir/$b" "$dir/$b"; done
}

if complete; then
    link_helm
    link_cert_manager
    link_node
    echo "$dir"
    exit 0
fi

tmp=$(mktemp -d "$cache_root/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

from_assets=()
if [[ -n ${KUBEBUILDER_ASSETS:-} ]]; then
    for b in etcd kube-apiserver kubectl; do
        if [[ -x $KUBEBUILDER_ASSETS/$b ]]; then
            cp "$KUBEBUILDER_ASSETS/$b" "$tmp/$b"
            from_assets+=("$b")
        fi
    done
    [[ ${#from_assets[@]} -eq 0 ]] || log "from KUBEBUILDER_ASSETS: ${from_assets[*]}"
fi
want() { [[ ! -x $tmp/$1 ]]; }

started=$(date +%s)
kube_pkgs=()
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    want "$b" && kube_pkgs+=("k8s.io/kubernetes/cmd/$b")
done
if [[ ${#kube_pkgs[@]} -gt 0 ]]; then
    log "building Kubernetes $k8s: ${kube_pkgs[*]##*/}"
    (cd "$tools/kube" && go build -ldflags "$ldflags -X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/client-go/pkg/version.gitVersion=$k8s" -o "$tmp/" "${kube_pkgs[@]}")
fi
if want etcd; then
    log "building etcd $etcd"
    (cd "$tools/kube" && go build -ldflags "$ldflags" -o "$tmp/etcd" ./etcd)
fi
log "building kwok $kwok"
(cd "$tools/kwok" && go build -ldflags "$ldflags" -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok)
log "built in $(($(date +%s) - started)) s"

rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
complete || { echo "k8s-bin: $dir is incomplete after the build" >&2; exit 1; }
link_helm
link_cert_manager
link_node
echo "$dir"
