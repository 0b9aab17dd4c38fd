# Sourced by the benchmarks of pod creates through a real kube-apiserver
# (scripts/bench-pods.sh, scripts/bench-open.sh), after bench_out: brings up
# the control plane of test/e2e/suite.sh in $out/e2e with gpuquota installed
# from deploy/ (3 webhook replicas, 2 controllers), builds test/bench/podcreate
# into $out/podcreate, makes the 50 namespaces bench-00..bench-49 (spread,
# all_ns) and bench-probe, sets an EXIT trap that takes it all down, and
# defines what a run is set up with:
#   state CONFIG          webhooks, replicas and controllers as CONFIG runs them
#   reset                 no benchmark pod and no quota left; etcd compacted
#   quotas CONFIG HARD NS...   CONFIG's quotas, HARD pods' worth each
#   pod_args CONFIG       podcreate's arguments for the pods CONFIG is sent
#   pids_of               podcreate's --pid arguments for every process
#   ctl_writes, wh_conns  the controllers' status writes, the webhooks' connections so far
# Configurations: floor, native (ResourceQuota), hooks (gpuquota's webhooks,
# nothing to charge, 1 replica), hooks-3 (the same, 3 replicas), gq, gq-tenant,
# gq-3, gq-b1, gq-t32, gq-e, gq-3e (scripts/bench-pods.sh says what each is).
E2E=$out/e2e
podcreate=$out/podcreate
NSPREAD=50

lib_loaded=0
cleanup() {
    if ((lib_loaded)); then
        # stopped here, by SIGTERM, rather than killed by suite.sh down
        set +e
        controllers off
        webhooks 0 >/dev/null 2>&1
    fi
    "$ROOT/test/e2e/suite.sh" down "$E2E" >/dev/null 2>&1 || true
    ((keep_out)) || rm -rf "$out"
}
trap cleanup EXIT

(cd "$ROOT/test/bench/podcreate" && GOFLAGS=-mod=readonly go build -o "$podcreate" .)
"$ROOT/test/e2e/suite.sh" up "$E2E" "$GQ" >/dev/null
export GQ_E2E_DIR=$E2E GQ ROOT
# shellcheck source=../test/e2e/lib.sh
source "$ROOT/test/e2e/lib.sh"
set -e
lib_loaded=1
C=$E2E/cluster

# The webhook configurations as installed (caBundle injected), to delete and
# put back between configurations.
for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
    kubectl get "$kind" gpuquota -o json |
        jq 'del(.metadata.resourceVersion, .metadata.uid, .metadata.creationTimestamp,
                .metadata.generation, .metadata.managedFields)' >"$out/$kind.json"
done

spread=()
for ((i = 0; i < NSPREAD; i++)); do spread+=("$(printf 'bench-%02d' "$i")"); done
all_ns=$(IFS=,; echo "${spread[*]}")
for n in "${spread[@]}"; do printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n---\n' "$n"; done |
    kubectl apply -f - >/dev/null
kubectl create namespace bench-probe >/dev/null
for n in "${spread[@]}" bench-probe; do eventually 60 kubectl -n "$n" get serviceaccount default; done

probe_pod='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"probe"},"spec":{"schedulerName":"bench-none",
  "containers":[{"name":"main","image":"registry.example/cuda:12",
  "resources":{"limits":{"gpuquota.io/gpu-memory":"1Gi"}}}]}}'
# hooks_seen: what kube-apiserver does now with a GPU pod: "true" once it
# calls gpuquota's /mutate (server-side dry run in a namespace without
# quota, nothing stored).
hooks_seen() {
    printf '%s' "$probe_pod" | kubectl -n bench-probe create --dry-run=server -f - \
        -o 'jsonpath={.metadata.labels.gpuquota\.io/managed}' 2>/dev/null || true
}
# hooks on|off: install or delete the webhook configurations and wait until
# kube-apiserver acts on it three times in a row.
hooks_state=on
hooks() {
    [[ $hooks_state == "$1" ]] && return 0
    local kind want ok=0
    for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
        if [[ $1 == on ]]; then kubectl create -f "$out/$kind.json" >/dev/null
        else kubectl delete "$kind" gpuquota >/dev/null; fi
    done
    want=$([[ $1 == on ]] && echo true || echo "")
    for _ in $(seq 100); do
        if [[ $(hooks_seen) == "$want" ]]; then ok=$((ok + 1)); else ok=0; fi
        ((ok >= 3)) && break
        sleep 0.2
    done
    hooks_state=$1
}
replicas_now=3
# replicas N [ARGS]: exactly N webhook replicas running with ARGS.
replicas() {
    [[ $replicas_now == "$*" ]] && return 0
    # lib.sh is written for scripts without errexit (its stop ends with a
    # kill that fails once the process is gone): its status is checked here.
    set +e
    webhooks "$@" >/dev/null
    local rc=$?
    set -e
    ((rc == 0)) || { echo "could not start $1 webhook replicas" >&2; exit 1; }
    replicas_now="$*"
    sleep 1 # kube-apiserver's endpoint cache follows the EndpointSlices
}
controllers_on=1
controllers() {
    if [[ $1 == on && $controllers_on == 0 ]]; then
        controller_start 0
        controller_start 1
        controllers_on=1
    elif [[ $1 == off && $controllers_on == 1 ]]; then
        controller_stop 0 || true
        controller_stop 1 || true
        controllers_on=0
    fi
}

# state CONFIG: webhooks, replicas and controllers as the configuration runs them.
state() {
    case $1 in
    floor | native) hooks off; controllers off ;;
    hooks | gq | gq-tenant) controllers on; replicas 1; hooks on ;;
    hooks-3) controllers on; replicas 3; hooks on ;;
    gq-t32) controllers on; replicas 1 --threads 32; hooks on ;;
    gq-b1) controllers on; replicas 1 --max-batch 1; hooks on ;;
    gq-3) controllers on; replicas 3; hooks on ;;
    gq-e) controllers on; replicas 1 --escrow-pods "${GQ_BENCH_ESCROW_PODS:-16}"; hooks on ;;
    gq-3e) controllers on; replicas 3 --escrow-pods "${GQ_BENCH_ESCROW_PODS:-16}"; hooks on ;;
    esac
}

# reset: no benchmark pod and no quota left; etcd compacted.
reset() {
    "$podcreate" clean --namespaces "$all_ns" --kubeconfig "$KUBECONFIG"
    kubectl delete resourcequota,gpuquota --all -A >/dev/null 2>&1 || true
    kubectl delete gputenantquota --all >/dev/null 2>&1 || true
    compact
}

# compact: etcd compacted to its current revision, so that every run starts
# from a comparable store. (Through etcd's JSON gateway: a range needs a key,
# here "\0", to answer with the header that carries the revision.)
compact() {
    local rev
    rev=$(curl -fsS -X POST -d '{"key":"AA=="}' "$ETCD/v3/kv/range" | jq -r .header.revision)
    curl -fsS -X POST -d "{\"revision\": \"$rev\", \"physical\": true}" "$ETCD/v3/kv/compaction" >/dev/null
}

# quotas CONFIG HARD NS...: the configuration's quotas, HARD pods' worth each
# (per namespace; for the tenant, in total), then wait until each has a status.
quotas() {
    local config=$1 hard=$2 n docs=""
    shift 2
    case $config in
    native)
        for n in "$@"; do
            docs+="apiVersion: v1
kind: ResourceQuota
metadata: {name: gpu, namespace: $n}
spec: {hard: {requests.aliyun.com/gpu-mem: \"$hard\"}}
---
"
        done
        ;;
    gq | gq-3 | gq-t32 | gq-b1 | gq-e | gq-3e)
        for n in "$@"; do
            docs+="apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: gpu, namespace: $n}
spec: {hard: {gpu-memory: ${hard}Gi}}
---
"
        done
        ;;
    gq-tenant)
        docs="apiVersion: gpuquota.io/v1alpha1
kind: GPUTenantQuota
metadata: {name: bench}
spec:
  namespaces: [${all_ns}]
  hard: {gpu-memory: ${hard}Gi}
"
        ;;
    *) return 0 ;;
    esac
    printf '%s' "$docs" | kubectl apply -f - >/dev/null
    local q=resourcequota
    [[ $config == native ]] || q=gpuquota,gputenantquota
    # ResourceQuota admission waits for status.hard; gpuquota's webhook does
    # not need the status, but its controller's first write would otherwise
    # land in the middle of the run.
    eventually 60 bash -c "kubectl get $q -A -o json | jq -e '[.items[] |
        select(.status.hard == null or (.kind != \"ResourceQuota\" and
               .status.observedGeneration != .metadata.generation))] | length == 0'"
}

# pod_args CONFIG: what the pods ask for: gpuquota's resource where its
# webhooks run (they rewrite it), the backend's device resource elsewhere.
pod_args() {
    case $1 in
    gq* | hooks*) echo --resource gpuquota.io/gpu-memory --quantity 1Gi ;;
    *) echo --resource aliyun.com/gpu-mem --quantity 1 ;;
    esac
}

pids_of() {
    local f
    printf -- '--pid apiserver=%s --pid etcd=%s --pid kcm=%s ' \
        "$(cat "$C/kube-apiserver.pid")" "$(cat "$C/etcd.pid")" "$(cat "$C/kube-controller-manager.pid")"
    for f in "$C"/kube-scheduler.pid "$C"/kwok.pid; do
        [[ -f $f ]] && printf -- '--pid %s=%s ' "$(basename "$f" .pid | sed 's/^kube-//')" "$(cat "$f")"
    done
    for f in "$E2E"/webhook-*.pid; do [[ -f $f ]] && printf -- '--pid webhook=%s ' "$(cat "$f")"; done
    for f in "$E2E"/controller-*.pid; do [[ -f $f ]] && printf -- '--pid controller=%s ' "$(cat "$f")"; done
}

# ctl_writes: status writes made so far by the running controllers (their
# gpuquota_controller_status_writes_total), to tell their writes from the
# webhook's in kube-apiserver's counts.
ctl_writes() {
    local f port v total=0
    for f in "$E2E"/controller-*.pid; do
        [[ -f $f ]] || continue
        port=$(sed -n 's/.*metrics listening on port \([0-9]*\).*/\1/p' "${f%.pid}.log" | tail -1)
        v=$(curl -fsS "http://127.0.0.1:$port/metrics" 2>/dev/null |
            awk '/^gpuquota_controller_status_writes_total /{print $2}')
        total=$((total + ${v:-0}))
    done
    echo "$total"
}

# wh_conns: connections the running webhook replicas have accepted so far
# (their gpuquota_http_connections_total): kube-apiserver keeps at most 25
# idle connections per webhook, so at more concurrent calls it dials again,
# a TLS handshake each.
wh_conns() {
    local f port v total=0
    for f in "$E2E"/webhook-*.port; do
        [[ -f $f ]] || continue
        port=$(cat "$f")
        v=$(curl -fsS --cacert "$E2E/certs/ca.crt" --resolve "gpuquota-webhook.$NS_SYS.svc:$port:127.0.0.1" \
            "https://gpuquota-webhook.$NS_SYS.svc:$port/metrics" 2>/dev/null |
            awk '/^gpuquota_http_connections_total /{print $2}')
        total=$((total + ${v:-0} - 1)) # not counting this read's own connection
    done
    echo "$total"
}

