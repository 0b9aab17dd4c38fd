#!/usr/bin/env bash
# The validating webhook end to end: the kube-apiserver stand-in calls real
# `gpuquota webhook` processes (HTTPS, fresh certificates) for pods created
# with kubectl; quotas are applied with kubectl and charged in their status.
# Then three webhook replicas take 200 concurrent reviews (curl over TLS)
# against a quota that fits exactly 10 pods while the stand-in injects 409s
# and latency. Usage: validate_integration.sh GPUQUOTA KUBE-STANDIN
set -uo pipefail
gq=$1
standin=$2
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/gq-validate-it.XXXXXX)
host=wh.gq-system.svc
source "$root/test/integration_lib.sh"
# The webhooks end on SIGTERM, as in a cluster.
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$work"
}

# ------------------------------------------------------------------ stand-in
# Sets S, KUBECONFIG, k and fault.
source "$root/test/standin_lib.sh"
source "$root/test/cluster_lib.sh"

k apply -f "$root/deploy/crds/" >/dev/null || { echo "CRDs not applied"; exit 1; }
for ns in team-a team-b team-c team-d team-x; do k create namespace $ns >/dev/null; done
k apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Namespace
metadata: {name: ml-a, labels: {team: ml}}
---
apiVersion: v1
kind: Namespace
metadata: {name: ml-b, labels: {team: ml}}
---
apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: team-a, namespace: team-a}
spec: {hard: {gpu-memory: 32Gi, gpu-pods: 10}}
---
apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: high, namespace: team-b}
spec:
  hard: {gpu-memory: 8Gi}
  scopeSelector:
    matchExpressions: [{scopeName: PriorityClass, operator: In, values: [high]}]
---
apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: team-c, namespace: team-c}
spec: {hard: {gpu-memory: 16Gi}}
---
apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: team-d, namespace: team-d}
spec: {hard: {gpu-memory: 16Gi}}
---
apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: ten, namespace: team-x}
spec: {hard: {gpu-memory: 10Gi}}
EOF
tenant_quota_yaml ml '{team: ml}' '{gpu-memory: 16Gi}' | k apply -f - >/dev/null

# --------------------------------------------------------------- webhooks
make_certs wh gq-system
ports=()
start_webhook() {
    start "$work/webhook$1.log" "$gq" webhook --tls-cert "$work/certs/tls.crt" \
        --tls-key "$work/certs/tls.key" --listen 127.0.0.1:0 --threads 8 --kubeconfig "$KUBECONFIG"
    ports+=("$port")
}
wh() { # wh N ARGS... PATH: curl to webhook N over TLS
    local port=${ports[$1]}
    shift
    local path=${*: -1}
    curl -sS --max-time 30 --cacert "$work/certs/ca.crt" "${@:1:$#-1}" \
        "https://127.0.0.1:$port$path"
}
start_webhook 0
start_webhook 1
# The accounts trusted to change gpuquota's keys are gpuquota's own, in the
# namespace it runs in (POD_NAMESPACE, the chart's and deploy/'s downward
# API): a release installed outside gpuquota-system still ungates.
POD_NAMESPACE=ops-x start_webhook 2
check_grep "trusted accounts default to gpuquota-system" "$work/webhook0.log" \
    'trusted to change gpuquota.s keys, gates and pins: system:serviceaccount:gpuquota-system:gpuquota-webhook, system:serviceaccount:gpuquota-system:gpuquota-controller'
check_grep "and follow POD_NAMESPACE" "$work/webhook2.log" \
    'trusted to change gpuquota.s keys, gates and pins: system:serviceaccount:ops-x:gpuquota-webhook, system:serviceaccount:ops-x:gpuquota-controller'
for i in 0 1 2; do
    for _ in $(seq 100); do
        [[ "$(wh $i -o /dev/null -w '%{http_code}' /readyz)" == 200 ]] && break
        sleep 0.1
    done
    check "webhook $i ready once caches synced" 200 "$(wh $i -o /dev/null -w '%{http_code}' /readyz)"
done

register_validating_webhook "${ports[0]}"

pod() { # pod NAME NAMESPACE GPU-MEMORY [PRIORITY-CLASS]
    cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $2}
spec:
  ${4:+priorityClassName: $4}
  containers:
    - name: trainer
      image: trainer:1
      resources: {limits: {gpuquota.io/gpu-memory: $3}}
EOF
}
reservations() { # reservations KIND NAME [NAMESPACE]
    k get "$1" "$2" ${3:+-n "$3"} -o jsonpath='{range .status.reservations[*]}{.key}{"\n"}{end}' |
        grep -c .
}
denied() { echo "Error from server (Forbidden): error when creating \"STDIN\": admission webhook \"validate.gpuquota.io\" denied the request: $1"; }

# ------------------------------------------------------------ kubectl cases
check "allowed" "pod/a1 created" "$(pod a1 team-a 16Gi | k create -f -)"
check "charged: one reservation" 1 "$(reservations gq team-a team-a)"
check "allowed up to the limit (equality)" "pod/a2 created" "$(pod a2 team-a 16Gi | k create -f -)"
check "denied at the limit" "$(denied 'exceeded quota: team-a, requested: gpu-memory=16Gi, used: gpu-memory=32Gi, limited: gpu-memory=32Gi')" \
    "$(pod a3 team-a 16Gi | k create -f -)"
check "denial not charged" 2 "$(reservations gq team-a team-a)"
check "reservation records the pod" "a1 team-a 16Gi 1" \
    "$(k get gq team-a -n team-a -o jsonpath='{.status.reservations[0].pod} {.status.reservations[0].namespace} {.status.reservations[0].gpu-memory} {.status.reservations[0].gpu-pods}')"

check "tenant: first namespace" "pod/m1 created" "$(pod m1 ml-a 8Gi | k create -f -)"
check "tenant: second namespace" "pod/m2 created" "$(pod m2 ml-b 8Gi | k create -f -)"
check "tenant: full across namespaces" "$(denied 'exceeded tenant quota: ml, requested: gpu-memory=1Gi, used: gpu-memory=16Gi, limited: gpu-memory=16Gi')" \
    "$(pod m3 ml-b 1Gi | k create -f -)"
check "tenant reservations" 2 "$(reservations gtq ml)"

check "scope: other priority not limited" "pod/b1 created" "$(pod b1 team-b 16Gi | k create -f -)"
check "scope: high priority limited" "$(denied 'exceeded quota: high, requested: gpu-memory=16Gi, used: gpu-memory=0, limited: gpu-memory=8Gi')" \
    "$(pod b2 team-b 16Gi high | k create -f -)"

check "dry run allowed" "pod/c1 created (server dry run)" \
    "$(pod c1 team-c 16Gi | k create --dry-run=server -f -)"
check "dry run not charged" 0 "$(reservations gq team-c team-c)"
check "dry run denied like the real thing" "$(denied 'exceeded quota: team-c, requested: gpu-memory=24Gi, used: gpu-memory=0, limited: gpu-memory=16Gi')" \
    "$(pod c2 team-c 24Gi | k create --dry-run=server -f -)"

check "tamper denied" 'Error from server (Forbidden): admission webhook "validate.gpuquota.io" denied the request: changing gpuquota.io/ labels and annotations is reserved to gpuquota (label gpuquota.io/managed)' \
    "$(k label pod a1 -n team-a gpuquota.io/managed=true)"
check "other labels are fine" "pod/a1 labeled" "$(k label pod a1 -n team-a app=train)"

fault '{"fail":{"count":1000,"code":503,"method":"GET","pathPrefix":"/apis/gpuquota.io/v1alpha1/namespaces/team-d/"}}'
check_match "API unreachable: denied (fail closed)" \
    'denied the request: gpuquota could not reach the API server to charge quota team-d/team-d: ' \
    "$(pod d1 team-d 8Gi | k create -f -)"
curl -sS -X POST "$S/standin/reset" >/dev/null
check "API back: allowed" "pod/d1 created" "$(pod d1 team-d 8Gi | k create -f -)"

# ------------------------------------------------ three replicas, 200 reviews
mkdir -p "$work/rv" "$work/out"
for i in $(seq 200); do
    printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"conc-%d","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"team-x","operation":"CREATE","userInfo":{"username":"u"},"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p%d","namespace":"team-x"},"spec":{"containers":[{"name":"c","image":"x","resources":{"limits":{"gpuquota.io/gpu-memory":"1Gi"}}}]}}}}' \
        "$i" "$i" >"$work/rv/$i.json"
done
fault '{"conflictStatus":30,"latencyMs":3}'
curls=()
for i in $(seq 200); do
    wh $((i % 3)) -H 'Content-Type: application/json' --data-binary "@$work/rv/$i.json" \
        -o "$work/out/$i.json" /validate &
    curls+=($!)
done
for p in "${curls[@]}"; do wait "$p"; done
curl -sS -X POST "$S/standin/reset" >/dev/null
answered=$(grep -l '"uid":"conc-' "$work"/out/*.json | wc -l)
allowed=$(grep -l '"allowed":true' "$work"/out/*.json | wc -l)
check "all 200 reviews answered" 200 "$answered"
check "exactly 10 allowed across three replicas" 10 "$allowed"
check "exactly 10 reservations recorded" 10 "$(reservations gq ten team-x)"
stats=$(curl -sS "$S/standin/stats")
check_match "the stand-in injected 409s" '"conflictsInjected":[1-9]' "$stats"
check_match "denials name the quota" '"message":"exceeded quota: ten, requested: gpu-memory=1Gi, used: gpu-memory=10Gi, limited: gpu-memory=10Gi"' \
    "$(cat "$work"/out/*.json | grep -m1 -o '"message":"[^"]*"')"
check_match "metrics count validate decisions" 'gpuquota_admission_requests_total\{webhook="validate",operation="CREATE",decision="denied"\} [1-9]' \
    "$(wh 0 /metrics)"

# /mutate reads GPULimitRanges from the same informer cache: a Container
# default turns a whole-GPU request into a slice (the watch brings the new
# object in shortly).
k create namespace team-lr >/dev/null
limit_range_yaml team-lr defaults '[{type: Container, default: {gpu-memory: 8Gi}}]' | k apply -f - >/dev/null
cat >"$work/whole.yaml" <<'EOF2'
apiVersion: v1
kind: Pod
metadata: {name: one-gpu, namespace: team-lr}
spec:
  containers:
    - name: trainer
      image: trainer:1
      resources: {limits: {nvidia.com/gpu: 1}}
EOF2
"$gq" admit --review-only --uid lr-1 "$work/whole.yaml" >"$work/lr.json"
mutated=
for _ in $(seq 50); do
    mutated=$(wh 0 -H 'Content-Type: application/json' --data-binary "@$work/lr.json" '/mutate?timeout=10s')
    [[ "$mutated" == *'"gpu-limit-range":"defaults"'* ]] && break
    sleep 0.1
done
check_match "/mutate: GPULimitRange default from the cache" \
    '"allowed":true,"patchType":"JSONPatch".*"charged":"gpu-memory=8Gi,gpus=0,gpu-pods=1".*"gpu-limit-range":"defaults"' \
    "$mutated"

# A replica whose API server never answers: not ready, and it denies (its
# caches never listed, so it reads live, and that fails).
sed "s#$S#http://127.0.0.1:1#" "$KUBECONFIG" >"$work/dead.kubeconfig"
KUBECONFIG=$work/dead.kubeconfig start_webhook 3
listed_and_failed() { grep -q 'list failed' "$work/webhook3.log" && echo yes; }
eventually "no API server: the replica tried to list" 10 yes listed_and_failed
check "no API server: not ready" 503 "$(wh 3 -o /dev/null -w '%{http_code}' /readyz)"
check_match "no API server: GPU pods denied" '"allowed":false.*gpuquota could not reach the API server to read the GPULimitRanges of team-x: GET /apis/gpuquota.io/v1alpha1/namespaces/team-x/gpulimitranges: Couldn'"'"'t connect to server"' \
    "$(wh 3 -H 'Content-Type: application/json' --data-binary "@$work/rv/1.json" /validate)"
check "no API server: /mutate fails closed for a GPU pod (500, failurePolicy decides)" \
    "500 {\"code\":500,\"message\":\"cannot read the GPULimitRanges of team-lr: GET /apis/gpuquota.io/v1alpha1/namespaces/team-lr/gpulimitranges: Couldn't connect to server\"}" \
    "$(wh 3 -H 'Content-Type: application/json' --data-binary "@$work/lr.json" -w ' %{http_code}' /mutate | awk '{code = $NF; $NF = ""; sub(/ $/, ""); print code, $0}')"

# SIGTERM while reviews wait for their charge: a replica with one server
# thread takes 20 reviews at once (each API call slowed to 300 ms); they wait
# suspended, not in threads. It is stopped while they wait: every one gets
# its answer (the quota is full: denied), and it exits 0.
"$gq" webhook --tls-cert "$work/certs/tls.crt" --tls-key "$work/certs/tls.key" \
    --listen 127.0.0.1:0 --threads 1 --kubeconfig "$KUBECONFIG" 2>"$work/webhook4.log" &
pid4=$!
pids+=("$pid4")
for _ in $(seq 100); do
    port=$(sed -n 's/.*"listening on [^"]*:\([0-9][0-9]*\)".*/\1/p' "$work/webhook4.log" | head -1)
    [[ -n "$port" ]] && break
    sleep 0.1
done
ports+=("$port")
ready4() { [[ $(wh 4 -o /dev/null -w '%{http_code}' /readyz) == 200 ]] && echo yes; }
eventually "one-thread replica ready" 20 yes ready4
gets() { curl -sS "$S/standin/stats" | jq .requests.get; }
gets0=$(gets)
fault '{"latencyMs":300}'
mkdir -p "$work/term"
curls=()
for i in $(seq 20); do
    sed "s/conc-$i\"/term-$i\"/; s/\"p$i\"/\"t$i\"/" "$work/rv/$i.json" >"$work/term/$i.json"
    wh 4 -H 'Content-Type: application/json' --data-binary "@$work/term/$i.json" \
        -o "$work/term/$i.out" /validate &
    curls+=($!)
done
round_started() { (($(gets) > gets0)) && echo yes; }
eventually "a charge round under way" 20 yes round_started
kill -TERM "$pid4"
for p in "${curls[@]}"; do wait "$p"; done
if wait "$pid4"; then pass "stopped with charges waiting: exit 0"; else fail "stopped with charges waiting: exit $?"; fi
curl -sS -X POST "$S/standin/reset" >/dev/null
check "stopped with charges waiting: all 20 answered" 20 \
    "$(grep -l '"uid":"term-.*"allowed":false.*exceeded quota: ten' "$work"/term/*.out | wc -l)"
pids=("${pids[@]:0:${#pids[@]}-1}")
if grep -q 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error' "$work/webhook4.log"; then
    fail "webhook 4 sanitizer report"
    grep -v '"level":"info"' "$work/webhook4.log" | head -40
fi

for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
for p in "${pids[@]}"; do
    wait "$p" || { fail "process $p exited with $?"; }
done
pids=()
for i in 0 1 2 3; do
    if grep -q 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error' "$work/webhook$i.log"; then
        fail "webhook $i sanitizer report"
        cat "$work/webhook$i.log" | grep -v '"level":"info"' | head -40
    fi
done
echo "$failures failure(s)"
[[ $failures -eq 0 ]]
