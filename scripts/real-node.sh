#!/usr/bin/env bash
# One real node for the control plane of scripts/local-cluster.sh: containerd
# and runc from Debian's packages, kubelet and kube-proxy built from the
# control plane's Kubernetes pin (scripts/k8s-bin.sh), CNI from Debian's
# containernetworking-plugins (bridge, host-local, portmap). GPU workload
# nodes stay kwok's; gpuquota's own pods run here, from its own image.
#
#   real-node.sh up CLUSTER_DIR               start the node (NAME: node-0)
#   real-node.sh load CLUSTER_DIR IMAGE.tar [REPOSITORY]
#                                             import an OCI archive into its containerd, its
#                                             tag under REPOSITORY (ghcr.io/gpuquota/gpuquota)
#   real-node.sh ctr CLUSTER_DIR ARGS...      ctr against its containerd (k8s.io namespace)
#   real-node.sh down CLUSTER_DIR             stop it and remove what it made
#
# Needs root. Addresses: the node is 10.251.0.1 on a dummy interface made
# here (kubelet refuses a loopback node IP; a bridge without ports, as the
# dummy driver is missing from some kernels); pods get 10.252.0.0/24 on a
# bridge; Services 10.96.0.0/16 as the control plane says. kube-apiserver
# stays on 127.0.0.1: a relay on the node address carries the `kubernetes`
# Service's traffic to it, and kube-apiserver reaches webhook pods by their
# IPs (it routes to Service endpoints). One node at a time per machine.
#
# What this sandbox needs (docs/e2e.md, "The real node"): containerd's CRI
# with restrict_oom_score_adj (no CAP_SYS_RESOURCE here), kubelet on cgroupfs
# without QoS cgroups or node allocatable (cgroup v1), and a local sandbox
# (pause) image, built here from Debian's busybox-static.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}
cluster=${2:-}
[[ -n $cmd && -n $cluster ]] || { echo "usage: $0 up|load|down CLUSTER_DIR [IMAGE.tar]" >&2; exit 2; }
cluster=$(cd "$cluster" 2>/dev/null && pwd || echo "$cluster")
NODE=node-0
ADDR=10.251.0.1
POD_CIDR=10.252.0.0/24
IFACE=gqnode0
BRIDGE=gqcni0
# Short paths: containerd and kubelet put unix sockets under them.
base=/var/lib/gq-node
run=/run/gq-node
state=$cluster/node # logs, pids, configuration
PAUSE=localhost/gq-pause:1

log() { echo "real-node: $*" >&2; }
# shellcheck source=ports.sh
source "$root/scripts/ports.sh"
die() {
    log "$*"
    exit 1
}

# shellcheck source=stop-pidfile.sh
source "$root/scripts/stop-pidfile.sh"

down() {
    local m
    stop_pidfile "$state/kube-proxy.pid"
    stop_pidfile "$state/kubelet.pid"
    # The pods' containers go with containerd's shims: kill them first.
    if [[ -S $run/containerd.sock ]]; then
        for m in $(ctr --address "$run/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null); do
            ctr --address "$run/containerd.sock" -n k8s.io tasks kill -s SIGKILL "$m" >/dev/null 2>&1 || true
        done
    fi
    stop_pidfile "$state/containerd.pid"
    pkill -KILL -f "containerd-shim-runc-v2 -namespace k8s.io -id .* -address $run/containerd.sock" \
        2>/dev/null || true
    stop_pidfile "$state/relay.pid"
    # kube-proxy's and kubelet's iptables chains go with them (also those of a
    # run whose state is gone): the jumps to KUBE-* chains, then the chains.
    local table rule chain
    for table in filter nat mangle; do
        while read -r rule; do
            eval "iptables -t $table ${rule/#-A/-D}" 2>/dev/null || true
        done < <(iptables -t "$table" -S 2>/dev/null | grep -E '^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j KUBE-' || true)
        for chain in $(iptables -t "$table" -S 2>/dev/null | sed -n 's/^-N \(KUBE-.*\)/\1/p' || true); do
            iptables -t "$table" -F "$chain" 2>/dev/null || true
        done
        for chain in $(iptables -t "$table" -S 2>/dev/null | sed -n 's/^-N \(KUBE-.*\)/\1/p' || true); do
            iptables -t "$table" -X "$chain" 2>/dev/null || true
        done
    done
    # kubelet's volume tmpfs, containerd's rootfs and netns mounts.
    for _ in 1 2 3; do
        for m in $(findmnt -rn -o TARGET | grep -E "^($base|$run)(/|$)" | sort -r || true); do
            umount -l "$m" 2>/dev/null || true
        done
    done
    ip link del "$IFACE" 2>/dev/null || true
    ip link del "$BRIDGE" 2>/dev/null || true
    # The bridge plugin's masquerade rules for the pod network.
    local rule
    while read -r rule; do
        [[ -n $rule ]] && eval "iptables -t nat ${rule/#-A/-D}" 2>/dev/null || true
    done < <(iptables -t nat -S POSTROUTING 2>/dev/null | grep -F -- "$POD_CIDR" || true)
    rm -rf "$base" "$run" "$state"
}

if [[ $cmd == down ]]; then
    down
    exit 0
fi
[[ $(id -u) == 0 ]] || die "needs root (containerd, kubelet, network)"
# shellcheck disable=SC1091
source "$cluster/env"
k=("$BIN/kubectl" --kubeconfig "$cluster/kubeconfig")

if [[ $cmd == ctr ]]; then # ctr against the node's containerd, e.g. images tag A B
    exec ctr --address "$run/containerd.sock" -n k8s.io "${@:3}"
fi
if [[ $cmd == load ]]; then
    img=${3:?usage: real-node.sh load CLUSTER_DIR IMAGE.tar [REPOSITORY]}
    # The archive's tag under REPOSITORY (what a Deployment names).
    ctr --address "$run/containerd.sock" -n k8s.io images import \
        --base-name "${4:-ghcr.io/gpuquota/gpuquota}" "$img" >&2
    exit 0
fi
[[ $cmd == up ]] || die "unknown command $cmd"
for t in containerd ctr runc socat iptables /usr/lib/cni/bridge busybox; do
    command -v "$t" >/dev/null || [[ -x $t ]] || die "$t is missing (make deps installs it)"
done
[[ -x $BIN/kubelet && -x $BIN/kube-proxy ]] || die "kubelet or kube-proxy missing in $BIN (scripts/k8s-bin.sh)"
down # what an earlier run left
mkdir -p "$state" "$base" "$run" "$state/cni"
trap 'rc=$?; if ((rc)); then log "failed; last lines:"; tail -n 5 "$state"/*.log >&2 2>/dev/null; down; fi' EXIT

# ------------------------------------------------------------------ network
ip link add "$IFACE" type bridge # no dummy driver in some kernels
ip addr add "$ADDR/32" dev "$IFACE"
ip link set "$IFACE" up
sysctl -qw net.ipv4.ip_forward=1
socat "TCP-LISTEN:6443,bind=$ADDR,reuseaddr,fork" "TCP:127.0.0.1:$APISERVER_PORT" \
    >"$state/relay.log" 2>&1 &
echo $! >"$state/relay.pid"
# The `kubernetes` Service's endpoint: the relay (kube-apiserver runs with
# --endpoint-reconciler-type=none and advertises 127.0.0.1).
"${k[@]}" apply -f - >/dev/null <<EOF
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kubernetes-real-node
  namespace: default
  labels: {kubernetes.io/service-name: kubernetes}
addressType: IPv4
endpoints: [{addresses: ["$ADDR"], conditions: {ready: true}}]
ports: [{name: https, port: 6443, protocol: TCP}]
EOF
cat >"$state/cni/10-gqnode.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "gqnode", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$base/cni-ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF

# -------------------------------------------------------------- credentials
pki=$cluster/pki
cert() { # NAME CN ORG
    openssl genrsa -out "$state/$1.key" 2048 2>/dev/null
    openssl req -new -key "$state/$1.key" -subj "/CN=$2${3:+/O=$3}" -out "$state/$1.csr" 2>/dev/null
    openssl x509 -req -in "$state/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
        -out "$state/$1.crt" -days 7 2>/dev/null
    cat >"$state/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:$APISERVER_PORT", certificate-authority: "$pki/ca.crt"}}]
users: [{name: u, user: {client-certificate: "$state/$1.crt", client-key: "$state/$1.key"}}]
contexts: [{name: local, context: {cluster: local, user: u}}]
current-context: local
EOF
}
cert kubelet "system:node:$NODE" system:nodes
cert kube-proxy system:kube-proxy

# ------------------------------------------------------------- containerd
cat >"$state/containerd.toml" <<EOF
version = 2
root = "$base/containerd"
state = "$run/containerd"
[grpc]
  address = "$run/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE"
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$state/cni"
EOF
containerd --config "$state/containerd.toml" >"$state/containerd.log" 2>&1 &
echo $! >"$state/containerd.pid"
for _ in $(seq 100); do ctr --address "$run/containerd.sock" version >/dev/null 2>&1 && break; sleep 0.1; done
ctr --address "$run/containerd.sock" version >/dev/null || die "containerd did not start"

# The sandbox image: Debian's busybox-static sleeping, as an OCI archive.
pause=$state/pause
mkdir -p "$pause/rootfs/bin"
cp "$(command -v busybox)" "$pause/rootfs/bin/busybox"
umoci init --layout "$pause/oci" >/dev/null
umoci new --image "$pause/oci:1" >/dev/null
umoci insert --image "$pause/oci:1" "$pause/rootfs" / >/dev/null
umoci config --image "$pause/oci:1" --config.entrypoint /bin/busybox \
    --config.cmd sleep --config.cmd 2147483647 --config.user 65535:65535 \
    --os linux --architecture amd64 >/dev/null
tar -C "$pause/oci" -cf "$pause.tar" .
ctr --address "$run/containerd.sock" -n k8s.io images import --base-name localhost/gq-pause \
    --index-name "$PAUSE" "$pause.tar" >/dev/null
# (read whole first: grep -q closing the pipe early would fail ctr under pipefail)
images=$(ctr --address "$run/containerd.sock" -n k8s.io images ls -q)
grep -qx "$PAUSE" <<<"$images" || die "the sandbox image $PAUSE did not import"

# ---------------------------------------------------------------- kubelet
printf 'nameserver 127.0.0.1\n' >"$state/resolv.conf"
cat >"$state/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ADDR
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 0
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: unix://$run/containerd.sock
resolvConf: $state/resolv.conf
clusterDomain: cluster.local
evictionHard: {memory.available: "0%", nodefs.available: "0%", imagefs.available: "0%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
serializeImagePulls: false
registerNode: true
EOF
"$BIN/kubelet" --config "$state/kubelet.yaml" --kubeconfig "$state/kubelet.kubeconfig" \
    --root-dir "$base/kubelet" --cert-dir "$base/pki" --node-ip "$ADDR" \
    --hostname-override "$NODE" --node-labels gpuquota.io/real-node=true \
    --v=1 >"$state/kubelet.log" 2>&1 &
echo $! >"$state/kubelet.pid"

# -------------------------------------------------------------- kube-proxy
cat >"$state/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $state/kube-proxy.kubeconfig}
mode: iptables
hostnameOverride: $NODE
bindAddress: $ADDR
healthzBindAddress: 127.0.0.1:$(claim_port "$cluster")
metricsBindAddress: 127.0.0.1:$(claim_port "$cluster")
clusterCIDR: $POD_CIDR
conntrack: {maxPerCore: 0}
EOF
"$BIN/kube-proxy" --config "$state/kube-proxy.yaml" --v=1 >"$state/kube-proxy.log" 2>&1 &
echo $! >"$state/kube-proxy.pid"

ready() { [[ $("${k[@]}" get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]; }
for _ in $(seq 600); do ready && break; sleep 0.2; done
ready || die "node $NODE did not become Ready"
trap - EXIT
echo "$state"
