# The e2e suite's shared library: gpuquota installed into the real control
# plane of scripts/local-cluster.sh the way a user installs it, and checks.
#
# Source it with GQ_E2E_DIR set to the suite's state folder (ctest passes it);
# test/e2e/suite.sh up|down creates and removes that state. GQ (the gpuquota
# binary) and ROOT are set by the sourcing script or derived here.
#
# Layout of $GQ_E2E_DIR:
#   cluster/       scripts/local-cluster.sh's folder (cluster/kubeconfig: admin)
#   certs/         the webhook's CA and serving pair (gpuquota certs generate)
#   config.yaml    the configuration the webhooks run with, read from the
#                  gpuquota-config ConfigMap that deploy/ installs
#   webhook-N.*    replica N: .pid, .port, .log, .kubeconfig (its SA token)
#   controller-N.* the same for controllers
set -uo pipefail
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
GQ=${GQ:-$ROOT/build/gpuquota}
E2E=${GQ_E2E_DIR:?GQ_E2E_DIR must name the e2e state folder}
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
if [[ -f $E2E/cluster/env ]]; then
    # shellcheck disable=SC1091
    source "$E2E/cluster/env"
    export PATH=$BIN:$PATH
fi
export KUBECONFIG=$E2E/cluster/kubeconfig
# shellcheck source=../manifests.sh
source "$ROOT/test/manifests.sh"
NS_SYS=gpuquota-system

failures=0
pass() { echo "ok   - $*"; }
fail() { echo "FAIL - $*"; failures=$((failures + 1)); }
check() { if [[ "$2" == "$3" ]]; then pass "$1"; else fail "$1: expected [$2], got [$3]"; fi; }
# check_match NAME ERE TEXT
check_match() { if [[ $3 =~ $2 ]]; then pass "$1"; else fail "$1: [$3] does not match [$2]"; fi; }
finish() {
    if ((failures)); then
        echo "$failures check(s) failed"
        exit 1
    fi
    echo "all checks passed"
    exit 0
}

# eventually SECONDS CMD...: poll CMD every 0.2 s until it succeeds.
eventually() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

# denied_with TEXT NS YAML: a server-side dry run of YAML in NS is refused
# with a message containing TEXT (the webhooks' caches have seen what the
# refusal needs). kubectl's output is read whole first: piped into grep -q
# under pipefail, kubectl's own failure (the refusal) would fail the test.
denied_with() {
    local out
    out=$(kubectl -n "$2" create --dry-run=server -f - <<<"$3" 2>&1)
    grep -qF -- "$1" <<<"$out"
}

# next_second: wait until the wall clock enters a new second, so that the
# next object's metadata.creationTimestamp (whole seconds) is later than
# those of the objects created before.
next_second() {
    local t
    t=$(date +%s)
    eventually 3 bash -c "(( \$(date +%s) > $t ))"
}

# free_port: a port for a server that cannot listen on port 0 and say which
# it got, held for the suite (scripts/ports.sh).
# shellcheck source=../../scripts/ports.sh
source "$ROOT/scripts/ports.sh"
free_port() { claim_port "$E2E"; }

# logged_port LOG FROM: the port a gpuquota started with --listen HOST:0
# logged ("listening on HOST:PORT") in LOG after byte FROM; waits 30 s at most.
# The kernel picks the port as the server binds, so no other process can
# take it in between (free_port's bind, close and hand on cannot promise that).
logged_port() {
    local p deadline=$((SECONDS + 30))
    while ((SECONDS < deadline)); do
        p=$(tail -c +"$(($2 + 1))" "$1" 2>/dev/null | sed -n 's/.*"listening on [^"]*:\([0-9][0-9]*\)".*/\1/p' | head -1)
        [[ -n $p ]] && { echo "$p"; return 0; }
        sleep 0.1
    done
    return 1
}

# token_kubeconfig USER TOKEN FILE [NAMESPACE]: a kubeconfig for the cluster
# that authenticates with TOKEN (named USER), default namespace NAMESPACE.
token_kubeconfig() {
    cat >"$3" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "$APISERVER", certificate-authority: "$E2E/cluster/pki/ca.crt"}
contexts:
- name: local
  context: {cluster: local, user: $1${4:+, namespace: $4}}
current-context: local
users:
- name: $1
  user: {token: "$2"}
EOF
}

# sa_kubeconfig SA FILE: a kubeconfig holding a token of service account SA
# in gpuquota-system, so the real RBAC authorizer checks what deploy/rbac.yaml grants.
sa_kubeconfig() {
    local token
    token=$(kubectl -n "$NS_SYS" create token "$1" --duration=24h) || return 1
    token_kubeconfig "$1" "$token" "$2"
}

# tenant_kubeconfig NS SA FILE: ServiceAccount SA in namespace NS, bound to
# the edit ClusterRole there and nowhere else, and a kubeconfig holding a
# token of it: what a team member with edit rights has, checked by the real
# RBAC authorizer (never impersonation by the admin).
tenant_kubeconfig() {
    local token
    kubectl -n "$1" create serviceaccount "$2" >/dev/null || return 1
    kubectl -n "$1" create rolebinding "$2-edit" --clusterrole=edit --serviceaccount="$1:$2" \
        >/dev/null || return 1
    token=$(kubectl -n "$1" create token "$2" --duration=1h) || return 1
    token_kubeconfig "$2" "$token" "$3" "$1"
}

# device_class NAME [CEL]: a DeviceClass (an administrator's object) whose
# one selector is the CEL expression given, or none.
device_class() {
    {
        printf 'apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: %s}\n' "$1"
        if [[ -n ${2:-} ]]; then
            printf 'spec:\n  selectors:\n  - cel: {expression: %s}\n' "'$2'"
        else
            printf 'spec: {}\n'
        fi
    } | kubectl apply -f - >/dev/null
}

# gpu_device_class: the DeviceClass gpu.nvidia.com (the configuration's
# default GPU class), as NVIDIA's DRA driver ships it.
gpu_device_class() { device_class gpu.nvidia.com 'device.driver == "gpu.nvidia.com"'; }

# register_endpoints: point the gpuquota-webhook Service at the running
# replicas, as the EndpointSlice controller does for a Deployment's ready
# pods. kube-apiserver (--enable-aggregator-routing) sends webhook calls
# there. Addresses are FQDN-typed: EndpointSlice validation refuses loopback
# IPs, and kube-apiserver uses the address as the URL host either way.
register_endpoints() {
    local f i port objs=""
    for f in "$E2E"/webhook-*.port; do
        [[ -f $f ]] || continue
        i=$(basename "$f" .port)
        i=${i#webhook-}
        port=$(cat "$f")
        objs+="---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: gpuquota-webhook-local-$i
  namespace: $NS_SYS
  labels: {kubernetes.io/service-name: gpuquota-webhook, endpointslice.kubernetes.io/managed-by: e2e.gpuquota.io}
addressType: FQDN
endpoints: [{addresses: [\"127.0.0.1\"], conditions: {ready: true}}]
ports: [{name: https, port: $port, protocol: TCP}]
"
    done
    kubectl -n "$NS_SYS" delete endpointslice -l endpointslice.kubernetes.io/managed-by=e2e.gpuquota.io \
        --ignore-not-found >/dev/null
    # (kubectl warns that FQDN endpoints are deprecated; they still work in 1.34.)
    [[ -z $objs ]] || printf '%s' "$objs" | kubectl apply -f - 2>&1 >/dev/null |
        { grep -v 'FQDN endpoints are deprecated' >&2 || true; }
}

# webhook_start N [ARGS...]: replica N of `gpuquota webhook`, as its Deployment
# runs it (deploy/webhook.yaml), on an ephemeral port; waits for /readyz.
# WH_KUBECONFIG replaces the kubeconfig it reads kube-apiserver with.
# GQ_E2E_WEBHOOK_ARGS (words) go before ARGS: a whole run's webhooks with,
# say, --escrow-pods 16.
webhook_start() {
    local n=$1 port from
    shift
    [[ -f $E2E/webhook.kubeconfig ]] || sa_kubeconfig gpuquota-webhook "$E2E/webhook.kubeconfig"
    from=$(stat -c %s "$E2E/webhook-$n.log" 2>/dev/null || echo 0)
    # Only kube-apiserver may call /mutate and /validate: its webhook client
    # certificate (scripts/local-cluster.sh) is required.
    # POD_NAMESPACE: what deploy/webhook.yaml's downward API sets.
    POD_NAMESPACE=$NS_SYS "$GQ" webhook --tls-cert "$E2E/certs/tls.crt" --tls-key "$E2E/certs/tls.key" \
        --client-ca "$E2E/cluster/pki/ca.crt" --client-cn kube-apiserver-webhook-client \
        --listen "127.0.0.1:0" --config "$E2E/config.yaml" \
        --kubeconfig "${WH_KUBECONFIG:-$E2E/webhook.kubeconfig}" ${GQ_E2E_WEBHOOK_ARGS:-} "$@" \
        >>"$E2E/webhook-$n.log" 2>&1 &
    echo $! >"$E2E/webhook-$n.pid"
    if ! port=$(logged_port "$E2E/webhook-$n.log" "$from"); then
        echo "webhook $n logged no port:" >&2
        tail -20 "$E2E/webhook-$n.log" >&2
        return 1
    fi
    echo "$port" >"$E2E/webhook-$n.port"
    if ! eventually 30 curl -fsS --cacert "$E2E/certs/ca.crt" \
        --resolve "gpuquota-webhook.$NS_SYS.svc:$port:127.0.0.1" \
        "https://gpuquota-webhook.$NS_SYS.svc:$port/readyz"; then
        echo "webhook $n did not become ready:" >&2
        tail -20 "$E2E/webhook-$n.log" >&2
        return 1
    fi
}

# wh_metric N SERIES: the value of the /metrics series SERIES (name and
# labels, exactly as exposed) of webhook replica N; 0 when it is not there.
wh_metric() {
    local port
    port=$(cat "$E2E/webhook-$1.port")
    curl -fsS --cacert "$E2E/certs/ca.crt" --resolve "gpuquota-webhook.$NS_SYS.svc:$port:127.0.0.1" \
        "https://gpuquota-webhook.$NS_SYS.svc:$port/metrics" |
        awk -v m="$2" '$1 == m {v = $2} END {print v + 0}'
}

# webhook_stop N [SIGNAL]: stop replica N (SIGTERM by default: drain, exit).
webhook_stop() {
    stop_pidfile "$E2E/webhook-$1.pid" "${2:-TERM}" 150
    rm -f "$E2E/webhook-$1.port"
}

# stop_pidfile FILE SIGNAL [TENTHS]: scripts/stop-pidfile.sh; the e2e
# processes get 15 s to drain and exit.
# shellcheck source=../../scripts/stop-pidfile.sh
source "$ROOT/scripts/stop-pidfile.sh"

# webhooks N [ARGS...]: exactly N replicas running with ARGS, registered.
webhooks() {
    local n=$1 i
    shift
    for f in "$E2E"/webhook-*.pid; do
        [[ -f $f ]] || continue
        i=$(basename "$f" .pid)
        webhook_stop "${i#webhook-}"
    done
    for ((i = 0; i < n; i++)); do webhook_start "$i" "$@" || return 1; done
    register_endpoints
}

# controller_start N [ARGS...]: controller N with leader election, as
# deploy/controller.yaml runs it (its Lease in POD_NAMESPACE, the namespace
# the Deployment's downward API names). GQ_E2E_CONTROLLER_ARGS (words) go
# before ARGS, as GQ_E2E_WEBHOOK_ARGS for the webhooks.
controller_start() {
    local n=$1
    shift
    [[ -f $E2E/controller.kubeconfig ]] || sa_kubeconfig gpuquota-controller "$E2E/controller.kubeconfig"
    POD_NAMESPACE=$NS_SYS "$GQ" controller --kubeconfig "$E2E/controller.kubeconfig" \
        --config "$E2E/config.yaml" --leader-elect --metrics-listen 127.0.0.1:0 \
        ${GQ_E2E_CONTROLLER_ARGS:-} "$@" \
        >>"$E2E/controller-$n.log" 2>&1 &
    echo $! >"$E2E/controller-$n.pid"
}

# controller_stop N [SIGNAL]: stop controller N (SIGTERM by default).
controller_stop() { stop_pidfile "$E2E/controller-$1.pid" "${2:-TERM}" 150; }

# ctl_pid N: the pid of controller N's current process.
ctl_pid() { cat "$E2E/controller-$1.pid" 2>/dev/null; }
# ctl_port N: the metrics port controller N's current process listens on.
ctl_port() {
    grep -o 'metrics listening on port [0-9]*' "$E2E/controller-$1.log" | tail -1 | awk '{print $NF}'
}
# leader: the index of the controller holding the Lease gpuquota-controller
# (its identity is HOSTNAME_PID), empty if none of them does.
leader() {
    local holder n
    holder=$(kubectl -n "$NS_SYS" get lease gpuquota-controller -o jsonpath='{.spec.holderIdentity}') || return 1
    for n in 0 1; do
        [[ -n $(ctl_pid "$n") && $holder == *_"$(ctl_pid "$n")" ]] && echo "$n"
    done
    return 0
}

# ctl_metric N SERIES: the value of SERIES (name{labels} as exposed) on
# controller N's /metrics; empty when it is not there.
ctl_metric() {
    curl -fsS "http://127.0.0.1:$(ctl_port "$1")/metrics" | awk -v m="$2" '$1 == m {print $2}'
}
# leader_metric SERIES: the same on the leading controller.
leader_metric() { ctl_metric "$(leader)" "$1"; }

# set_config YAML: the configuration every replica starts with from now on
# (replicas must be restarted to read it, as after a ConfigMap change).
set_config() { printf '%s\n' "$1" >"$E2E/config.yaml"; }

# ns NAME [LABEL=VALUE...]: a fresh namespace for one test (deleted first if left over).
ns() {
    local name=$1
    shift
    kubectl delete namespace "$name" --ignore-not-found --wait=true >/dev/null 2>&1
    kubectl create namespace "$name" >/dev/null || return 1
    [[ $# -eq 0 ]] || kubectl label namespace "$name" "$@" >/dev/null
    # Pods need the namespace's default ServiceAccount (kube-controller-manager makes it).
    eventually 30 kubectl -n "$name" get serviceaccount default
}

# pod_yaml NAME LIMITS [EXTRA-YAML-UNDER-METADATA]: a one-container pod whose
# limits are the flow-map entries LIMITS (e.g. 'cpu: 100m'), printed as YAML.
pod_yaml() {
    cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
${3:-}
spec:
$(containers "$2" '  ')
EOF
}

# containers LIMITS [INDENT]: the one container of the test pods (main,
# registry.example/cuda:12, limits the flow-map entries LIMITS) as the
# containers field of a pod spec, indented by INDENT (pod templates).
containers() {
    local i=${2:-}
    printf '%scontainers:\n%s- name: main\n%s  image: registry.example/cuda:12\n' "$i" "$i" "$i"
    printf '%s  resources: {limits: {%s}}\n' "$i" "$1"
}

# gpu_pod NAME MEMORY [EXTRA-YAML-UNDER-METADATA]: a pod asking for MEMORY of
# gpuquota.io/gpu-memory.
gpu_pod() { pod_yaml "$1" "gpuquota.io/gpu-memory: \"$2\"" "${3:-}"; }

# quota NS NAME HARD-FLOW-MAP [SPEC-FIELD...]: a GPUQuota, e.g.
# quota team-a team-a '{gpu-memory: 20Gi}' 'whenExceeded: Queue'
quota() {
    local field
    {
        printf 'apiVersion: gpuquota.io/v1alpha1\nkind: GPUQuota\nmetadata: {name: %s, namespace: %s}\n' "$2" "$1"
        printf 'spec:\n  hard: %s\n' "$3"
        for field in "${@:4}"; do printf '  %s\n' "$field"; done
    } | kubectl apply -f - >/dev/null
}

# queue_tenant NAME HARD-FLOW-MAP: a Queue GPUTenantQuota NAME over the
# namespaces labelled tenant=NAME (the cohort of their GPUQuotas).
queue_tenant() {
    {
        printf 'apiVersion: gpuquota.io/v1alpha1\nkind: GPUTenantQuota\nmetadata: {name: %s}\n' "$1"
        printf 'spec:\n  namespaceSelector: {matchLabels: {tenant: %s}}\n  hard: %s\n' "$1" "$2"
        printf '  whenExceeded: Queue\n'
    } | kubectl apply -f - >/dev/null
}

# limit_range NS NAME LIMITS: a GPULimitRange (LIMITS: spec.limits, a YAML flow sequence).
limit_range() { limit_range_yaml "$@" | kubectl apply -f - >/dev/null; }

# scratch NS: a fresh folder in $work; on exit it is removed and namespace NS
# deleted (waited for).
scratch() {
    work=$(mktemp -d)
    # shellcheck disable=SC2064 # expanded now, on purpose
    trap "rm -rf '$work'; kubectl delete namespace '$1' --ignore-not-found --wait=true --timeout=120s >/dev/null" EXIT
}

# create_parallel NS PAR FILE...: kubectl create every FILE in NS, PAR at a
# time; each FILE.out gets what kubectl said about it, FILE.rc 0 (created),
# 1 (refused) or 2 (neither: test/e2e/tools/kubectl_results.py).
create_parallel() {
    local ns=$1 par=$2 w i
    shift 2
    local files=("$@") out=() pids=()
    # Worker w creates files w, w+PAR, w+2*PAR, ... one after another in one
    # kubectl process: PAR creates in flight at any time, without the CPU
    # of starting a kubectl for each.
    for ((w = 0; w < par && w < ${#files[@]}; w++)); do
        local args=()
        for ((i = w; i < ${#files[@]}; i += par)); do args+=(-f "${files[i]}"); done
        out[w]=${files[w]}.batch
        kubectl -n "$ns" create "${args[@]}" >"${out[w]}" 2>&1 &
        pids+=($!)
    done
    wait "${pids[@]}"
    # Each refusal names its file, each create its pod: one reading of all.
    cat "${out[@]}" >"${files[0]}.batches"
    python3 "$ROOT/test/e2e/tools/kubectl_results.py" split "${files[0]}.batches" "${files[@]}"
}

# tally DENIAL-ERE FILE...: after create_parallel, count the FILEs created
# (names in admitted), denied with output matching DENIAL-ERE, and failed
# otherwise (the first five shown) into created, denied and other.
tally() {
    local deny=$1 f rc
    shift
    created=0 denied=0 other=0 admitted=()
    for f in "$@"; do
        read -r rc <"$f.rc"
        if [[ $rc == 0 ]]; then
            created=$((created + 1))
            admitted+=("$(basename "$f" .yaml)")
        elif grep -qE "$deny" "$f.out"; then
            denied=$((denied + 1))
        else
            other=$((other + 1))
            ((other <= 5)) && echo "# $(basename "$f" .yaml) (exit $rc): $(tail -1 "$f.out")"
        fi
    done
}

# used NS NAME KEY: status.used[KEY] of a GPUQuota ("" while unset).
used() { kubectl -n "$1" get gpuquota "$2" -o "jsonpath={.status.used.$3}" 2>/dev/null; }
# reservations NS NAME: how many reservations a GPUQuota holds.
reservations() {
    kubectl -n "$1" get gpuquota "$2" -o json | jq '.status.reservations // [] | length'
}

# Borrowing tests (t_borrow, t_cohort, t_cohort_abuse): the scheduling gates of pod NS/POD
# (comma-joined), whether it exists ungated, the live pods of NS as
# name=own|true|gated (true: marked gpuquota.io/borrowing), how many are in
# one state, and the objects of NS named by Events of a reason.
bor_gates() { kubectl -n "$1" get pod "$2" -o json 2>/dev/null | jq -r '[.spec.schedulingGates[]?.name] | join(",")'; }
bor_admitted() { [[ $(kubectl -n "$1" get pod "$2" -o jsonpath='{.metadata.uid}' 2>/dev/null) && -z $(bor_gates "$1" "$2") ]]; }
bor_pods() {
    kubectl -n "$1" get pods -o json | jq -r '[.items[] | select(.metadata.deletionTimestamp == null) |
        "\(.metadata.name)=\(if ([.spec.schedulingGates[]?] | length) > 0 then "gated" else (.metadata.annotations["gpuquota.io/borrowing"] // "own") end)"] | sort | .[]'
}
bor_count() { bor_pods "$1" | grep -c "=$2\$"; }
bor_events() { kubectl -n "$1" get events -o json | jq -r --arg r "$2" '[.items[] | select(.reason == $r) | .involvedObject.name] | sort | .[]'; }

# bor_held NS...: the GiB of GPU memory the admitted pods (ungated, not
# being deleted) of each NS hold, space-separated, from one list of every
# namespace (one instant): what kube-scheduler may place, whatever the
# statuses say.
bor_held() {
    kubectl get pods -A -o json | jq -r --arg a "$*" '
        def mem(ns): [.items[] | select(.metadata.namespace == ns and .metadata.deletionTimestamp == null
            and ([.spec.schedulingGates[]?] | length) == 0)
            | .spec.containers[].resources.limits["aliyun.com/gpu-mem"] // "0" | tonumber] | add // 0;
        . as $all | [$a | split(" ")[] as $n | $all | mem($n)] | map(tostring) | join(" ")'
}
# bor_sample FILE NS...: in the background, a line of bor_held NS... into
# FILE (emptied first) every 0.2 s; $sampler is its pid (bor_never stops it).
bor_sample() {
    local file=$1 line
    shift
    : >"$file"
    while :; do
        line=$(bor_held "$@")
        [[ $(wc -w <<<"$line") == "$#" ]] && echo "$line" >>"$file"
        sleep 0.2
    done &
    sampler=$!
}
# bor_never FILE AWK-CONDITION TEXT: stop the sampler; samples were taken
# and none of them matches the condition (TEXT says what that would be).
bor_never() {
    local n over
    kill "$sampler" 2>/dev/null
    sampler=
    n=$(wc -l <"$1")
    over=$(awk "$2" "$1" | head -3 | tr '\n' ';')
    check_match "samples taken ($n, 0.2 s apart)" "^[1-9][0-9]+$" "$n"
    check "$3" "" "$over"
}
