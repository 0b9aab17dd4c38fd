#!/usr/bin/env bash
# A real Kubernetes control plane on 127.0.0.1, for the e2e suite and
# `make demo-cluster`: etcd, kube-apiserver (TLS, RBAC and Node authorizers,
# the default admission plugins with the webhook and ResourceQuota ones),
# kube-controller-manager, kube-scheduler and kwok with simulated GPU nodes.
#
#   local-cluster.sh up DIR     start everything; DIR/kubeconfig is the admin's
#   local-cluster.sh down DIR   stop everything and remove DIR
#   local-cluster.sh restart-apiserver DIR   stop and start kube-apiserver (etcd keeps its data)
#   local-cluster.sh compact DIR             compact etcd to its current revision
#
# Every component listens on an ephemeral 127.0.0.1 port. DIR/env holds the
# addresses (APISERVER, ETCD) and DIR/bin the binaries' folder, for tests.
# If `up` fails, everything it started is stopped again.
#
# Webhooks are reached the way a cluster reaches them: through their Service.
# kube-apiserver runs with --enable-aggregator-routing, so it sends webhook
# calls to the Service's EndpointSlices; scripts/e2e-lib.sh registers the
# local gpuquota processes there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}
dir=${2:-}
[[ -n $cmd && -n $dir ]] || { echo "usage: $0 up|down|restart-apiserver|compact DIR" >&2; exit 2; }

# Nothing here may go through a proxy: every address is on this machine.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost

# shellcheck source=ports.sh
source "$root/scripts/ports.sh"

# wait_until SECONDS CMD...: poll until CMD succeeds.
wait_until() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then return 1; fi
        sleep 0.2
    done
}

start() { # start NAME CMD...: run CMD in the background, logging to DIR/NAME.log
    local name=$1
    shift
    "$@" >"$dir/$name.log" 2>&1 &
    echo "$!" >"$dir/$name.pid"
}

# shellcheck source=stop-pidfile.sh
source "$root/scripts/stop-pidfile.sh"
stop() { stop_pidfile "$dir/$1.pid"; } # stop NAME: SIGTERM, then SIGKILL after 10 s

fail() {
    echo "local-cluster: $*" >&2
    local l
    for l in "$dir"/*.log; do
        [[ -f $l ]] || continue
        echo "--- last lines of $(basename "$l")" >&2
        tail -n 15 "$l" >&2
    done
    exit 1
}

pki() {
    local p=$dir/pki
    mkdir -p "$p"
    (
        cd "$p"
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 7 \
            -subj "/CN=gpuquota-e2e-ca" 2>/dev/null
        # name CN O [SANs]: a certificate signed by the cluster CA.
        cert() {
            local ext=
            openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" \
                -subj "/CN=$2${3:+/O=$3}" 2>/dev/null
            if [[ -n ${4:-} ]]; then
                ext=$1.ext
                printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$4" >"$ext"
            else
                ext=$1.ext
                printf 'extendedKeyUsage=clientAuth\n' >"$ext"
            fi
            openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
                -out "$1.crt" -days 7 -extfile "$ext" 2>/dev/null
            rm -f "$1.csr" "$1.ext"
        }
        cert apiserver kube-apiserver "" \
            "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:10.96.0.1"
        cert admin admin system:masters
        cert controller-manager system:kube-controller-manager
        cert scheduler system:kube-scheduler
        cert kwok kwok system:masters
        # kube-apiserver's client certificate towards admission webhooks
        # (AdmissionConfiguration below), for webhooks that verify callers.
        cert webhook-client kube-apiserver-webhook-client
        openssl genrsa -out sa.key 2048 2>/dev/null
        openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
        # Bearer tokens kube-apiserver accepts (--token-auth-file): one for
        # a cluster admin, for clients that authenticate with a token (a
        # kubeconfig's token, tokenFile or exec credential plugin).
        printf '%s,token-admin,token-admin,system:masters\n' \
            "$(openssl rand -hex 24)" >tokens.csv
    )
}

kubeconfig() { # kubeconfig FILE CERT-NAME
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $dir/pki/ca.crt
contexts:
- name: local
  context: {cluster: local, user: $2}
current-context: local
users:
- name: $2
  user:
    client-certificate: $dir/pki/$2.crt
    client-key: $dir/pki/$2.key
EOF
}

start_apiserver() {
    # shellcheck disable=SC1091
    source "$dir/env"
    start kube-apiserver "$BIN/kube-apiserver" \
        --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
        --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
        --tls-cert-file="$dir/pki/apiserver.crt" --tls-private-key-file="$dir/pki/apiserver.key" \
        --client-ca-file="$dir/pki/ca.crt" \
        --token-auth-file="$dir/pki/tokens.csv" \
        --service-account-issuer=https://kubernetes.default.svc.cluster.local \
        --service-account-key-file="$dir/pki/sa.pub" \
        --service-account-signing-key-file="$dir/pki/sa.key" \
        --service-cluster-ip-range=10.96.0.0/16 \
        --authorization-mode=Node,RBAC \
        --enable-admission-plugins=NodeRestriction,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ResourceQuota \
        --enable-aggregator-routing=true \
        --kubelet-preferred-address-types=InternalIP,Hostname \
        --allow-privileged=true \
        --endpoint-reconciler-type=none \
        --audit-log-path="$dir/audit.log" --audit-policy-file="$dir/audit-policy.yaml" \
        --audit-log-maxsize=100 --audit-log-maxbackup=1 \
        --admission-control-config-file="$dir/admission.yaml" \
        --profiling="${GQ_APISERVER_PROFILING:-false}"
    wait_until 60 "$BIN/kubectl" --kubeconfig "$dir/kubeconfig" get --raw /readyz ||
        fail "kube-apiserver did not become ready"
}

up() {
    [[ ! -e $dir/env ]] || { echo "local-cluster: $dir already holds a cluster" >&2; exit 1; }
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    trap 'rc=$?; if ((rc)); then down_all; fi' EXIT
    local bin
    bin=$("$root/scripts/k8s-bin.sh")
    ETCD_PORT=$(claim_port "$dir")
    ETCD_PEER_PORT=$(claim_port "$dir")
    APISERVER_PORT=$(claim_port "$dir")
    cat >"$dir/env" <<EOF
BIN=$bin
ETCD_PORT=$ETCD_PORT
ETCD_PEER_PORT=$ETCD_PEER_PORT
APISERVER_PORT=$APISERVER_PORT
APISERVER=https://127.0.0.1:$APISERVER_PORT
ETCD=http://127.0.0.1:$ETCD_PORT
EOF
    pki
    kubeconfig "$dir/kubeconfig" admin
    kubeconfig "$dir/controller-manager.kubeconfig" controller-manager
    kubeconfig "$dir/scheduler.kubeconfig" scheduler
    kubeconfig "$dir/kwok.kubeconfig" kwok
    # Metadata of every write to pods, evictions and gpuquota objects:
    # `gpuquota audit` reads this log in the demo, scripts/bench-preempt.sh
    # the evictions.
    cat >"$dir/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete]
    resources:
      - group: ""
        resources: [pods, pods/eviction]
      - group: gpuquota.io
  - level: None
EOF

    # kube-apiserver presents pki/webhook-client to every webhook behind a
    # Service, as a cluster that authenticates to its webhooks does.
    cat >"$dir/webhook-client.kubeconfig" <<EOF
apiVersion: v1
kind: Config
users:
- name: "*.svc"
  user:
    client-certificate: $dir/pki/webhook-client.crt
    client-key: $dir/pki/webhook-client.key
EOF
    local plugin
    {
        echo "apiVersion: apiserver.config.k8s.io/v1"
        echo "kind: AdmissionConfiguration"
        echo "plugins:"
        for plugin in ValidatingAdmissionWebhook MutatingAdmissionWebhook; do
            echo "- name: $plugin"
            echo "  configuration:"
            echo "    apiVersion: apiserver.config.k8s.io/v1"
            echo "    kind: WebhookAdmissionConfiguration"
            echo "    kubeConfigFile: $dir/webhook-client.kubeconfig"
        done
    } >"$dir/admission.yaml"

    start etcd "$bin/etcd" --name e2e --data-dir "$dir/etcd" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster "e2e=http://127.0.0.1:$ETCD_PEER_PORT" \
        --unsafe-no-fsync --quota-backend-bytes=8589934592 --log-level=warn
    wait_until 30 curl -fsS "http://127.0.0.1:$ETCD_PORT/health" || fail "etcd did not start"

    start_apiserver

    local kcm_port sched_port
    kcm_port=$(claim_port "$dir")
    sched_port=$(claim_port "$dir")
    start kube-controller-manager "$bin/kube-controller-manager" \
        --kubeconfig="$dir/controller-manager.kubeconfig" \
        --authentication-kubeconfig="$dir/controller-manager.kubeconfig" \
        --authorization-kubeconfig="$dir/controller-manager.kubeconfig" \
        --bind-address=127.0.0.1 --secure-port="$kcm_port" \
        --service-account-private-key-file="$dir/pki/sa.key" \
        --root-ca-file="$dir/pki/ca.crt" \
        --use-service-account-credentials=true \
        --leader-elect=false \
        --concurrent-deployment-syncs=5 --concurrent-job-syncs=5 \
        --kube-api-qps=200 --kube-api-burst=400
    start kube-scheduler "$bin/kube-scheduler" \
        --kubeconfig="$dir/scheduler.kubeconfig" \
        --authentication-kubeconfig="$dir/scheduler.kubeconfig" \
        --authorization-kubeconfig="$dir/scheduler.kubeconfig" \
        --bind-address=127.0.0.1 --secure-port="$sched_port" \
        --leader-elect=false
    # Pod and node IPs are loopback addresses: they are labels on fake pods,
    # and anything that tried to reach one would stay on this machine.
    start kwok "$bin/kwok" --kubeconfig="$dir/kwok.kubeconfig" \
        --manage-all-nodes=false \
        --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
        --cidr=127.200.0.0/16 --node-ip=127.200.0.1 \
        --node-lease-duration-seconds=40 \
        --server-address=127.0.0.1:0

    local k=("$bin/kubectl" --kubeconfig "$dir/kubeconfig")
    # The default ServiceAccount appears once kube-controller-manager runs;
    # pods cannot be created before it.
    wait_until 60 "${k[@]}" -n default get serviceaccount default ||
        fail "kube-controller-manager made no default ServiceAccount"
    "${k[@]}" apply -f "$root/test/e2e/nodes.yaml" >/dev/null
    wait_until 60 bash -c "[[ \$('${k[0]}' --kubeconfig '$dir/kubeconfig' get nodes --no-headers 2>/dev/null | grep -c ' Ready ') -ge \$(grep -c '^kind: Node' '$root/test/e2e/nodes.yaml') ]]" ||
        fail "kwok did not make the nodes Ready"
    trap - EXIT
    echo "$dir/kubeconfig"
}

down_all() {
    local c
    for c in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$c"; done
}

case $cmd in
up) up ;;
down)
    [[ -d $dir ]] || exit 0
    down_all
    release_ports "$dir"
    rm -rf "$dir"
    ;;
restart-apiserver)
    stop kube-apiserver
    start_apiserver
    ;;
compact)
    # shellcheck disable=SC1091
    source "$dir/env"
    # etcd 3.6 refuses a range request without a key; any key reports the revision.
    rev=$(curl -fsS -X POST -d '{"key": "AA=="}' "$ETCD/v3/kv/range" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
    curl -fsS -X POST -d "{\"revision\": \"$rev\", \"physical\": true}" "$ETCD/v3/kv/compaction" >/dev/null
    echo "$rev"
    ;;
*)
    echo "usage: $0 up|down|restart-apiserver|compact DIR" >&2
    exit 2
    ;;
esac
