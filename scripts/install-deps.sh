#!/usr/bin/env bash
# Install what building, testing and demonstrating gpuquota needs, from
# Debian packages. Does nothing when everything is already present.
set -euo pipefail

pkgs=()
need_pc() { pkg-config --exists "$1" 2>/dev/null || pkgs+=("$2"); }
need_cmd() { command -v "$1" >/dev/null 2>&1 || pkgs+=("$2"); }

need_cmd pkg-config pkg-config
need_cmd cmake cmake
need_cmd gcc gcc
need_cmd make make
need_cmd curl curl
need_cmd openssl openssl
need_cmd wrk wrk
need_cmd /usr/bin/time time # scripts/bench.sh: wrk's own CPU time
need_cmd python3 python3
need_cmd jq jq # the kube-standin shell tests read JSON with it
need_cmd file file # e2e_monitoring checks the dashboard it draws is a PNG
# test_kube_dead_peer: a network namespace of its own, packets dropped.
need_cmd unshare util-linux
need_cmd ip iproute2
need_cmd iptables iptables
# The real node (scripts/real-node.sh): containerd, CNI plugins, the relay
# to kube-apiserver and the sandbox image's busybox.
need_cmd containerd containerd
[ -x /usr/lib/cni/bridge ] || pkgs+=(containernetworking-plugins)
need_cmd socat socat
need_cmd busybox busybox-static
need_cmd conntrack conntrack
# make image and its test: the image from Debian's packages, read and run.
need_cmd mmdebstrap mmdebstrap
need_cmd umoci umoci
need_cmd skopeo skopeo
need_cmd runc runc
# deploy/Dockerfile built by its test (test/dockerfile_build.sh).
need_cmd buildah buildah
# make fuzz and the fuzz runs of make test: clang and its libFuzzer runtime.
need_cmd clang clang
compgen -G '/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a' >/dev/null ||
    pkgs+=(libclang-rt-14-dev)
# The Helm chart tests (test/helm/) read rendered manifests with PyYAML.
python3 -c 'import yaml' >/dev/null 2>&1 || pkgs+=(python3-yaml)
# e2e_monitoring draws the dashboard from its samples with Debian's matplotlib.
{ [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1; } ||
    pkgs+=(python3-matplotlib)
need_pc json-c libjson-c-dev
need_pc yaml-0.1 libyaml-dev
need_pc libcurl libcurl4-openssl-dev
need_pc libmicrohttpd libmicrohttpd-dev
need_pc openssl libssl-dev
need_pc gnutls libgnutls28-dev
need_pc cmocka libcmocka-dev
# Any working kubectl will do; Debian ships one as kubernetes-client.
kubectl version --client >/dev/null 2>&1 || pkgs+=(kubernetes-client)

if [ ${#pkgs[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${pkgs[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
