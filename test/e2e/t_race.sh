#!/usr/bin/env bash
# Zero over-admission through kube-apiserver: 200 concurrent pod creates
# (32 kubectl processes at a time) spread by the Service over 3 webhook
# replicas, against a GPUQuota that fits exactly 10 of them. Exactly 10 pods
# exist afterwards, the 190 others were denied with the exceeded-quota
# message, and once the controller has recounted, status.used is exactly the
# 10 pods with no reservation left over.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
since=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ) # this run's records in kube-apiserver's audit log

NS=e2e-race
N=200 FIT=10 PAR=32
scratch "$NS"

used_is() { [[ $(used "$NS" race "$1") == "$2" ]]; }
no_reservations() { [[ $(reservations "$NS" race) == 0 ]]; }
now_ms() { date +%s%3N; }
# validations N DECISION: how many /validate CREATE decisions replica N counted.
validations() {
    wh_metric "$1" "gpuquota_admission_requests_total{webhook=\"validate\",operation=\"CREATE\",decision=\"$2\"}"
}

ns "$NS" || { fail "namespace $NS"; finish; }
# 40Gi of 4Gi pods: 10 fit. gpu-pods is there to be counted, not to bind.
quota "$NS" race '{gpu-memory: 40Gi, gpu-pods: 100}'
for ((i = 0; i < N; i++)); do gpu_pod "$(printf 'r-%03d' "$i")" 4Gi >"$work/$(printf 'r-%03d' "$i").yaml"; done

declare -a allowed0 denied0
for n in 0 1 2; do
    allowed0[n]=$(validations "$n" allowed)
    denied0[n]=$(validations "$n" denied)
done
t0=$(now_ms)
create_parallel "$NS" "$PAR" "$work"/r-*.yaml
t=$(($(now_ms) - t0))
echo "# $N creates, $PAR at a time, in $t ms"

tally '^Error from server \(Forbidden\): error when creating ".*": admission webhook "validate\.gpuquota\.io" denied the request: exceeded quota: race, requested: gpu-memory=4Gi, used: gpu-memory=40Gi, limited: gpu-memory=40Gi$' \
    "$work"/r-*.yaml
check "kubectl create succeeded" "$FIT" "$created"
check "kubectl create denied with the exceeded-quota message" $((N - FIT)) "$denied"
check "kubectl create failed otherwise" 0 "$other"

sum_allowed=0 sum_denied=0
for n in 0 1 2; do
    a=$(($(validations "$n" allowed) - allowed0[n]))
    d=$(($(validations "$n" denied) - denied0[n]))
    echo "# replica $n: $a allowed, $d denied"
    ((a + d > 0)) && pass "replica $n took part" || fail "replica $n decided nothing"
    sum_allowed=$((sum_allowed + a))
    sum_denied=$((sum_denied + d))
done
check "allowed decisions over the replicas" "$FIT" "$sum_allowed"
check "denied decisions over the replicas" $((N - FIT)) "$sum_denied"

pods=$(kubectl -n "$NS" get pods -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort)
check "pods that exist" "$FIT" "$(grep -c . <<<"$pods")"
check "the pods that exist are the ones admitted" "$(printf '%s\n' "${admitted[@]}" | sort)" "$pods"
check "sum of the charges recorded on the pods" "$((FIT * 4))" \
    "$(kubectl -n "$NS" get pods -o json | jq '[.items[].metadata.annotations["gpuquota.io/charged"] | capture("gpu-memory=(?<g>[0-9]+)Gi").g | tonumber] | add // 0')"
# Each admitted pod was charged under its own uid (kube-apiserver's audit log
# carries /validate's reservation key as an audit annotation).
check "each pod's reservation key is its uid" \
    "$(kubectl -n "$NS" get pods -o json | jq -r '.items[] | "\(.metadata.name) \(.metadata.uid)"' | sort)" \
    "$(jq -r --arg ns "$NS" --arg since "$since" 'select(.verb == "create" and .objectRef.resource == "pods"
            and .requestReceivedTimestamp >= $since
            and .objectRef.namespace == $ns and .stage == "ResponseComplete"
            and .responseStatus.code == 201)
        | "\(.objectRef.name) \(.annotations["validate.gpuquota.io/reservation"])"' \
        "$E2E/cluster/audit.log" | sort)"

# The controller recounts from pods and drops the reservations of pods it has
# seen; anything else would go only when it expires (reservation TTL 2 min).
t0=$(now_ms)
eventually 15 used_is gpu-memory 40Gi && echo "# used gpu-memory 40Gi $(($(now_ms) - t0)) ms after the last create"
check "status.used gpu-memory" 40Gi "$(used "$NS" race gpu-memory)"
check "status.used gpu-pods" "$FIT" "$(used "$NS" race gpu-pods)"
eventually 150 no_reservations && echo "# reservations gone $(($(now_ms) - t0)) ms after the last create"
check "reservations left" 0 "$(reservations "$NS" race)"
check "status.used gpu-memory after the reservations went" 40Gi "$(used "$NS" race gpu-memory)"
# Nothing more fits.
out=$(gpu_pod r-late 4Gi | kubectl -n "$NS" create -f - 2>&1)
check_match "one more pod is denied" 'exceeded quota: race, requested: gpu-memory=4Gi, used: gpu-memory=40Gi, limited: gpu-memory=40Gi$' "$out"

finish
