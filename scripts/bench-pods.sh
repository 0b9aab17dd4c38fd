#!/usr/bin/env bash
# What gpuquota adds to a pod create through a real kube-apiserver, next to
# Kubernetes' own ResourceQuota, in one run on this machine (issue 10;
# docs/performance.md). Figures only: nothing is asserted.
#
#   scripts/bench-pods.sh BUILD_DIR
#
# The control plane of test/e2e/suite.sh (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok) with gpuquota installed from
# deploy/; test/bench/podcreate (client-go, one HTTP/2 connection per client)
# creates the pods. Configurations, each with 16 and 64 clients, into one
# namespace and over 50:
#   floor     no webhooks, no quota; pods ask aliyun.com/gpu-mem: 1
#   native    ResourceQuota on requests.aliyun.com/gpu-mem per namespace, no webhooks
#   gq        gpuquota /mutate + /validate, a GPUQuota per namespace, 1 webhook replica;
#             pods ask gpuquota.io/gpu-memory: 1Gi (rewritten to aliyun.com/gpu-mem: 1)
#   gq-tenant gpuquota, one GPUTenantQuota over the 50 namespaces, 1 replica
#   gq-3      as gq with 3 webhook replicas
# and two that say where the cost is:
#   hooks     gpuquota's webhooks called, no quota to charge (the price of
#             the two HTTPS calls alone)
#   gq-b1     as gq, the replica run with --max-batch 1: group commit off,
#             one status write per charge
#   gq-t32    (not in the default list) as gq with --threads 32 instead of
#             the default one server thread per CPU
#   gq-e, gq-3e  as gq and gq-3 with escrow on
#             (--escrow-pods GQ_BENCH_ESCROW_PODS, default 16;
#             docs/validating-webhook.md, Escrow)
# The quota admits 3/4 of the pods sent and denies the rest ("deny" runs);
# one more cell (one namespace, 64 clients) sizes it so that every pod fits.
# The gpuquota controller (2 replicas, leader election, as deployed) runs
# during the gpuquota configurations only. Before every run: the previous
# pods deleted, quotas created afresh, etcd compacted.
#
# Environment: GQ_BENCH_PODS (1000 creates per run: gpuquota's runs go at
# 30-150 creates/s on the shared 2-CPU machine, and one round has 33 runs),
# GQ_BENCH_ROUNDS (1),
# GQ_BENCH_SCALE_PODS (20000; 0 skips the controller scale part),
# GQ_BENCH_SCALE_NS (1000), GQ_BENCH_CONFIGS (the pod-create configurations,
# default "floor native hooks gq gq-tenant gq-3 gq-b1 gq-e gq-3e"), GQ_BENCH_CHURN_RATE
# (100 creates/s and as many deletes/s against the scale state; 0 skips the
# churn), GQ_BENCH_CHURN_RATES (more rates, e.g. "25 50": one more churn at
# each with the controllers as deployed, to find the rate where event ->
# status stays within its target on this machine; default none),
# GQ_BENCH_CHURN_SECONDS (20), GQ_BENCH_CHURN_WORKERS (2: one more
# churn with the controllers run with --workers 2, the default before it
# became 8; 0 skips it), GQ_BENCH_OUT (folder kept with the raw JSON lines
# and logs; default a temporary one, removed), GQ_BENCH_PROFILE (1: after
# the rounds, one more run of each of floor, native, hooks and gq, in one
# namespace with 16 clients and every pod fitting, while kube-apiserver's
# CPU is profiled (it runs with --profiling); scripts/apiserver-profile.py
# prints where its CPU goes per create; GQ_BENCH_PROFILE_PODS, 8000 per run;
# the churns are profiled too, over the middle half of each),
# GQ_BENCH_SCALE_VS (another gpuquota binary: after the scale runs, its
# initial sync and this build's in turn, GQ_BENCH_SCALE_VS_ROUNDS times (2),
# each on quotas made afresh and then once more), GQ_BENCH_REST_SECONDS (60:
# kube-apiserver's requests over that long at rest, the controllers stopped
# and then running; 0 skips it).
set -euo pipefail
PODS=${GQ_BENCH_PODS:-1000}
ROUNDS=${GQ_BENCH_ROUNDS:-1}
SCALE_PODS=${GQ_BENCH_SCALE_PODS:-20000}
SCALE_NS=${GQ_BENCH_SCALE_NS:-1000}
CHURN_RATE=${GQ_BENCH_CHURN_RATE:-100}
CHURN_RATES=${GQ_BENCH_CHURN_RATES:-}
CHURN_SECONDS=${GQ_BENCH_CHURN_SECONDS:-20}
CHURN_WORKERS=${GQ_BENCH_CHURN_WORKERS:-2}
PROFILE=${GQ_BENCH_PROFILE:-0}
SCALE_VS=${GQ_BENCH_SCALE_VS:-}
SCALE_VS_ROUNDS=${GQ_BENCH_SCALE_VS_ROUNDS:-2}
REST_SECONDS=${GQ_BENCH_REST_SECONDS:-60}
PROFILE_PODS=${GQ_BENCH_PROFILE_PODS:-8000}
if ((PROFILE)); then export GQ_APISERVER_PROFILING=true; fi

# shellcheck source=scripts/bench-out.sh
. "$(dirname "$0")/bench-out.sh"
bench_out bench-pods "${1:-}"

started=$SECONDS

echo "== pod creates through kube-apiserver: floor, native ResourceQuota, gpuquota"
# shellcheck source=scripts/bench-pods-lib.sh
. "$ROOT/scripts/bench-pods-lib.sh"
echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); $PODS creates per run, $ROUNDS round(s)"

# one ROUND CONFIG LAYOUT CLIENTS FIT: one run, one JSON line into results.jsonl.
one() {
    local round=$1 config=$2 layout=$3 clients=$4 fit=$5 nss hard res w0 c0
    local -a ns_list
    if [[ $layout == 1ns ]]; then ns_list=(bench-00); else ns_list=("${spread[@]}"); fi
    nss=$(IFS=,; echo "${ns_list[*]}")
    local per_ns=$((PODS / ${#ns_list[@]}))
    if [[ $config == gq-tenant ]]; then
        hard=$PODS
        [[ $fit == fit ]] || hard=$((PODS * 3 / 4))
    else
        hard=$per_ns
        [[ $fit == fit ]] || hard=$((per_ns * 3 / 4))
    fi
    state "$config"
    reset
    quotas "$config" "$hard" "${ns_list[@]}"
    local res_args
    read -r -a res_args <<<"$(pod_args "$config")"
    [[ $config == gq* || $config == hooks ]] && res_args+=(--watch-quotas)
    w0=$(ctl_writes)
    c0=$(wh_conns)
    # shellcheck disable=SC2046
    res=$("$podcreate" run --kubeconfig "$KUBECONFIG" --namespaces "$nss" --clients "$clients" \
        --pods "$PODS" --run "r$round-$config-$layout-$clients-$fit" "${res_args[@]}" $(pids_of))
    printf '%s\n' "$res" | jq -c --arg round "$round" --arg config "$config" --arg layout "$layout" \
        --arg fit "$fit" --argjson hard "$hard" --arg load "$(cut -d' ' -f1 /proc/loadavg)" \
        --argjson cw "$(($(ctl_writes) - w0))" --argjson wc "$(($(wh_conns) - c0))" \
        '. + {round: ($round|tonumber), config: $config, layout: $layout, fit: $fit, hard: $hard,
              load: ($load|tonumber), controller_writes: $cw, webhook_connections: $wc}' >>"$out/results.jsonl"
    printf '%s\n' "$res" | jq -r --arg c "$config" --arg l "$layout" --arg f "$fit" \
        '"  \($c) \($l) \(.clients) clients \($f): \(.per_second|floor)/s p99 \(.p99_ms) ms, \(.admitted) admitted \(.denied) denied \(.errors) errors"'
}

# In an order that restarts the webhooks as rarely as possible.
# GQ_BENCH_ROUNDS=0 leaves the create benchmark out (only the controller part).
read -r -a configs <<<"${GQ_BENCH_CONFIGS:-floor native hooks gq gq-tenant gq-3 gq-b1 gq-e gq-3e}"
reverse=()
for ((i = ${#configs[@]} - 1; i >= 0; i--)); do reverse+=("${configs[i]}"); done
: >"$out/results.jsonl"
for ((r = 1; r <= ROUNDS; r++)); do
    echo "round $r (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    cell=0
    for spec in "1ns 16 deny" "50ns 16 deny" "1ns 64 deny" "50ns 64 deny" "1ns 64 fit"; do
        read -r layout clients fit <<<"$spec"
        # Alternate the order (ABBA) so that both the drift of the machine's
        # load and the switches between configurations fall on every one.
        if ((cell % 2)); then order=("${reverse[@]}"); else order=("${configs[@]}"); fi
        for config in "${order[@]}"; do
            # without a quota, fit and deny are the same run
            [[ $fit == fit && ($config == floor || $config == hooks) ]] && continue
            one "$r" "$config" "$layout" "$clients" "$fit"
        done
        cell=$((cell + 1))
    done
done
# profile_one CONFIG: a run of PROFILE_PODS creates (1ns, 16 clients, every
# pod fits) with kube-apiserver's CPU profiled over 3 s of it (pprof takes
# whole seconds); adds "CONFIG=TOP_FILE=MS_PER_CREATE" to profile_cols for
# apiserver-profile.py. (Not in a subshell: state keeps what is running.)
profile_one() {
    local config=$1 res_args res pid
    read -r -a res_args <<<"$(pod_args "$config")"
    state "$config"
    reset
    quotas "$config" "$PROFILE_PODS" bench-00
    # shellcheck disable=SC2046
    "$podcreate" run --kubeconfig "$KUBECONFIG" --namespaces bench-00 --clients 16 \
        --pods "$PROFILE_PODS" --run "profile-$config" "${res_args[@]}" $(pids_of) >"$out/profile-$config.json" &
    pid=$!
    sleep 0.5
    kubectl get --raw '/debug/pprof/profile?seconds=3' >"$out/profile-$config.pprof"
    wait "$pid"
    go tool pprof -top -cum -nodecount=100000 "$BIN/kube-apiserver" "$out/profile-$config.pprof" \
        >"$out/profile-$config.top" 2>/dev/null
    res=$(jq -r '"\(.cpu_s.apiserver * 1000 / .sent)"' "$out/profile-$config.json")
    profile_cols+=("$config=$out/profile-$config.top=$res")
}
if ((PROFILE)); then
    echo
    echo "== where kube-apiserver's CPU goes per create (1ns, 16 clients, $PROFILE_PODS creates, every pod fits)"
    profile_cols=()
    for config in floor native hooks gq; do profile_one "$config"; done
    python3 "$ROOT/scripts/apiserver-profile.py" "${profile_cols[@]}"
fi
state floor
reset
if ((ROUNDS > 0)); then
    echo
    python3 "$ROOT/scripts/bench-pods-report.py" "$out/results.jsonl"
    echo "create benchmark: $((SECONDS - started)) s"
fi

# api_requests M0 M1: kube-apiserver's requests between two snapshots of
# podcreate metrics, "VERB resource N" by count.
api_requests() {
    jq -rn --slurpfile a "$1" --slurpfile b "$2" '$a[0] as $a | $b[0] | to_entries |
        map(select(.key | startswith("req "))
            | {k: .key[4:], v: (.value - ($a[.key] // 0))} | select(.v > 0))
        | sort_by(-.v) | map("\(.k) \(.v)") | join(", ")'
}

# api_watches M: the watches open in a snapshot, in all.
api_watches() {
    jq -r 'to_entries | map(select(.key | startswith("watching ")) | .value) | add' "$1"
}

# ctl_ports: the metrics port of every running controller replica.
ctl_ports() {
    local f
    for f in "$E2E"/controller-*.pid; do
        [[ -f $f ]] && sed -n 's/.*metrics listening on port \([0-9]*\).*/\1/p' "${f%.pid}.log" | tail -1
    done
    return 0
}

# ctl_leader_stat: the leading replica's status writes, reconciles and
# seconds spent reconciling so far ("WRITES RECONCILES SECONDS").
ctl_leader_stat() {
    local port
    for port in $(ctl_ports); do
        curl -fsS "http://127.0.0.1:$port/metrics" 2>/dev/null | awk '
            /^gpuquota_controller_leader / {l = $2}
            /^gpuquota_controller_status_writes_total / {w = $2}
            /^gpuquota_controller_reconcile_duration_seconds_count/ {n += $2}
            /^gpuquota_controller_reconcile_duration_seconds_sum/ {d += $2}
            END {if (l == 1) print w + 0, n + 0, d + 0; exit !(l == 1)}' && return 0
    done
    echo "0 0 0"
}

# ctl_leader_ready: the leading controller replica holds every GPU pod and
# has written them into the scale GPUQuotas, with its queue empty.
ctl_leader_ready() {
    local port
    for port in $(ctl_ports); do
        curl -fsS "http://127.0.0.1:$port/metrics" 2>/dev/null | awk -v nq="$SCALE_NS" '
            /^gpuquota_controller_leader / {l = $2}
            /^gpuquota_controller_queue_depth / {q = $2}
            /^gpuquota_controller_tracked_pods / {t = $2}
            /^gpuquota_quota_used\{namespace="scale-/ {n++; s += $2}
            END {exit !(l == 1 && q == 0 && n == nq && t > 0 && s == t * 1073741824)}' && return 0
    done
    return 1
}

# at_rest: kube-apiserver's requests over REST_SECONDS with nothing
# changing, the controllers stopped, then running (both replicas as
# deployed, after the leader caught up with the scale pods): what the
# controllers ask of kube-apiserver at rest is the difference.
at_rest() {
    local state
    echo "== controller: kube-apiserver requests at rest over ${REST_SECONDS} s ($SCALE_PODS pods)"
    for state in off on; do
        controllers "$state"
        if [[ $state == on ]]; then
            eventually 300 ctl_leader_ready || echo "  the leader did not catch up in 300 s"
        fi
        sleep 5
        "$podcreate" metrics --kubeconfig "$KUBECONFIG" >"$out/rest-$state.m0.json"
        sleep "$REST_SECONDS"
        "$podcreate" metrics --kubeconfig "$KUBECONFIG" >"$out/rest-$state.m1.json"
        echo "  controllers $state: $(api_requests "$out/rest-$state.m0.json" "$out/rest-$state.m1.json")" \
            "(load average $(cut -d' ' -f1-3 /proc/loadavg))"
    done
}

# churn_one LABEL DELETE_FROM [--latency=false]: CHURN_RATE creates/s and as
# many deletes/s for CHURN_SECONDS over the scale namespaces; one JSON line
# into churn.jsonl, a summary printed.
churn_one() {
    local label=$1 from=$2 res w0 n0 d0 w1 n1 d1
    shift 2
    read -r w0 n0 d0 <<<"$(ctl_leader_stat)"
    local prof=""
    if ((PROFILE)); then
        # the middle half of the churn, whole seconds
        (sleep "$(awk -v s="$CHURN_SECONDS" 'BEGIN {print s / 4}')"
         kubectl get --raw "/debug/pprof/profile?seconds=$(awk -v s="$CHURN_SECONDS" 'BEGIN {s = int(s / 2); print s < 1 ? 1 : s}')" \
             >"$out/profile-$label.pprof") &
        prof=$!
    fi
    # shellcheck disable=SC2046
    res=$("$podcreate" churn --kubeconfig "$KUBECONFIG" --namespaces "$scale_list" \
        --rate "$CHURN_RATE" --seconds "$CHURN_SECONDS" --clients 16 --run "$label" \
        --fill-run scale --fill-pods "$SCALE_PODS" --delete-from "$from" "$@" $(pids_of))
    read -r w1 n1 d1 <<<"$(ctl_leader_stat)"
    if [[ -n $prof ]] && wait "$prof"; then
        go tool pprof -top -cum -nodecount=100000 "$BIN/kube-apiserver" "$out/profile-$label.pprof" \
            >"$out/profile-$label.top" 2>/dev/null
        churn_profile_cols+=("$label=$out/profile-$label.top=$(printf '%s\n' "$res" |
            jq -r '.cpu_s.apiserver * 1000 / ([.creates + .deletes, 1] | max)')")
    fi
    printf '%s\n' "$res" | jq -c --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" '. + {load: $load}' >>"$out/churn.jsonl"
    printf '%s\n' "$res" | jq -r --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" '
        "  \(.run): \(.creates) creates (\(.creates_per_second * 10 | round / 10)/s) + \(.deletes) deletes (\(.deletes_per_second * 10 | round / 10)/s) in \(.seconds * 10 | round / 10) s, \(.skipped) skipped, \(.errors) errors, worst lag behind the pace \(.max_lag_ms) ms; call p50/p99 \(.call_ms.p50)/\(.call_ms.p99) ms",
        (if .seen > 0 then "    event -> status over \(.seen) ops: p50 \(.status_ms.p50) ms, p99 \(.status_ms.p99) ms, max \(.status_ms.max) ms (from the call sent: \(.status_from_send_ms.p50)/\(.status_from_send_ms.p99)/\(.status_from_send_ms.max) ms); \(.unseen) unseen, \(.seen_before_return) seen before the call returned" else empty end),
        "    CPU s: \(.cpu_s | to_entries | map("\(.key) \(.value)") | join(", ")); the machine busy \(.machine_busy_s) of its \(.machine_s) CPU s (load average \($load))",
        "    kube-apiserver requests, pods left out: \(.apiserver_requests | to_entries | map(select(.key | test(" pods$") | not)) | sort_by(-.value) | map("\(.key) \(.value)") | join(", "))",
        "    pods: \(.apiserver_requests | to_entries | map(select(.key | test(" pods$"))) | map("\(.key) \(.value)") | join(", ")); watch events sent: \(.apiserver_watch_events | to_entries | sort_by(-.value) | .[:6] | map("\(.key) \(.value)") | join(", "))"'
    if ((n1 > n0)); then
        echo "    leading controller: $((w1 - w0)) status writes, $((n1 - n0)) reconciles," \
            "$(awk -v a="$d0" -v b="$d1" -v n=$((n1 - n0)) 'BEGIN {printf "%.1f", 1000 * (b - a) / n}') ms each on average"
    fi
}

# churn_all: the churn with the controllers stopped (kube-apiserver's load
# without them), then with both replicas running (leader election, as
# deployed) after the leader has caught up, twice; watches open in each state.
churn_profile_cols=()
churn_all() {
    local ops=$((${CHURN_RATE%.*} * ${CHURN_SECONDS%.*})) from=$((SCALE_NS / 2))
    echo "== controller: event -> status under $CHURN_RATE creates/s + $CHURN_RATE deletes/s for ${CHURN_SECONDS} s (real kube-apiserver, $SCALE_PODS pods)"
    controllers off
    sleep 2
    "$podcreate" metrics --kubeconfig "$KUBECONFIG" >"$out/watches-off.json"
    echo "  controllers stopped: $(api_watches "$out/watches-off.json") watches open"
    churn_one churn-off "$from" --latency=false
    from=$((from + ops))
    local t0=$SECONDS
    controllers on
    eventually 300 ctl_leader_ready || echo "  the leader did not catch up in 300 s"
    echo "  controllers started; the leader caught up in $((SECONDS - t0)) s"
    sleep 2
    "$podcreate" metrics --kubeconfig "$KUBECONFIG" >"$out/watches-on.json"
    echo "  controllers running: $(api_watches "$out/watches-on.json") watches open"
    echo "    the controllers' watches (running - stopped): $(jq -rn --slurpfile a "$out/watches-off.json" \
        --slurpfile b "$out/watches-on.json" '$a[0] as $a | $b[0] | to_entries
        | map(select(.key | startswith("watching ")) | {k: .key[9:], v: (.value - ($a[.key] // 0))} | select(.v != 0))
        | map("\(.k) \(.v)") | join(", ")')"
    local i
    for i in 1 2; do
        churn_one "churn-on$i" "$from"
        from=$((from + ops))
        eventually 120 ctl_leader_ready || echo "  the leader did not catch up in 120 s"
    done
    # the same with more reconcile threads than the default 2
    if ((CHURN_WORKERS > 0)); then
        controllers off
        controller_start 0 --workers "$CHURN_WORKERS"
        controller_start 1 --workers "$CHURN_WORKERS"
        controllers_on=1
        eventually 300 ctl_leader_ready || echo "  the leader did not catch up in 300 s"
        echo "  controllers restarted with --workers $CHURN_WORKERS"
        churn_one "churn-workers$CHURN_WORKERS" "$from"
        from=$((from + ops))
    fi
    if [[ -n $CHURN_RATES ]]; then
        controllers off
        controllers on
        eventually 300 ctl_leader_ready || echo "  the leader did not catch up in 300 s"
        local rate
        for rate in $CHURN_RATES; do
            echo "  at $rate creates/s + $rate deletes/s, controllers as deployed:"
            CHURN_RATE=$rate churn_one "churn-rate$rate" "$from"
            # on to the next fill pod in namespace SCALE_NS/2 (mod SCALE_NS),
            # so that creates and deletes keep to different namespaces
            from=$((from + ${rate%.*} * ${CHURN_SECONDS%.*}))
            from=$((from + ((SCALE_NS / 2 - from % SCALE_NS) % SCALE_NS + SCALE_NS) % SCALE_NS))
            eventually 120 ctl_leader_ready || echo "  the leader did not catch up in 120 s"
        done
    fi
    controllers off
    if ((${#churn_profile_cols[@]})); then
        echo "  where kube-apiserver's CPU went, over the middle half of each churn:"
        python3 "$ROOT/scripts/apiserver-profile.py" --per "pod op" "${churn_profile_cols[@]}" | sed 's/^/    /'
    fi
    local bdir
    bdir=$(dirname "$GQ")
    if [[ -x $bdir/bench/bench_controller ]]; then
        echo "== the same against the stand-in: bench_controller $SCALE_PODS $SCALE_NS $CHURN_RATE $CHURN_SECONDS (load average $(cut -d' ' -f1-3 /proc/loadavg))"
        (cd "$ROOT" && "$bdir/bench/bench_controller" "$bdir/test/kube-standin" "$GQ" deploy/crds \
            "$SCALE_PODS" "$SCALE_NS" "$CHURN_RATE" "$CHURN_SECONDS") 2>&1 | sed 's/^/  /'
    fi
}

# ---- the controller against the real apiserver -----------------------------
# SCALE_NS namespaces with a GPUQuota each and 10 GPUTenantQuotas by label; a
# fresh controller over them without pods (the RSS baseline); then
# SCALE_PODS pods written as /mutate leaves them (webhooks off, so the fill
# takes the apiserver's pace rather than the charging's); then a fresh
# controller again, twice.
if ((SCALE_PODS > 0)); then
    echo
    echo "== controller: initial sync of $SCALE_PODS GPU pods in $SCALE_NS namespaces (real kube-apiserver)"
    scale_start=$SECONDS
    state floor
    docs=""
    qdocs="" # the quotas alone, to make afresh (GQ_BENCH_SCALE_VS)
    scale_ns=()
    for ((i = 0; i < SCALE_NS; i++)); do
        n=$(printf 'scale-%04d' "$i")
        scale_ns+=("$n")
        docs+="apiVersion: v1
kind: Namespace
metadata: {name: $n, labels: {tenant: t$((i % 10))}}
---
"
        qdocs+="apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: gpu, namespace: $n}
spec: {hard: {gpu-memory: 1000Gi}}
---
"
    done
    for ((t = 0; t < 10; t++)); do
        qdocs+="apiVersion: gpuquota.io/v1alpha1
kind: GPUTenantQuota
metadata: {name: t$t}
spec:
  namespaceSelector: {matchLabels: {tenant: t$t}}
  hard: {gpu-memory: 10000Gi}
---
"
    done
    printf '%s%s' "$docs" "$qdocs" | kubectl apply -f - >/dev/null
    scale_list=$(IFS=,; echo "${scale_ns[*]}")
    for n in "${scale_ns[@]}"; do eventually 120 kubectl -n "$n" get serviceaccount default; done

    # ctl_measure LABEL PODS: a fresh controller (no leader election) until
    # every GPUQuota is reconciled to PODS Gi in all; prints
    # "SYNCED_MS RECONCILED_MS RSS_KB HWM_KB CPU_S TRACKED APISERVER_CPU_S".
    ctl_measure() {
        local log=$out/scale-$1.log port pid t0 now synced="" done_s="" rss hwm tracked m cpu a0 a1
        local apid
        apid=$(cat "$C/kube-apiserver.pid")
        "$podcreate" metrics --kubeconfig "$KUBECONFIG" >"$out/scale-$1.m0.json"
        a0=$(awk '{print $14 + $15}' "/proc/$apid/stat")
        port=$(free_port)
        t0=$(date +%s%N)
        "${ctl_bin:-$GQ}" controller --kubeconfig "$E2E/controller.kubeconfig" --config "$E2E/config.yaml" \
            --metrics-listen "127.0.0.1:$port" >"$log" 2>&1 &
        pid=$!
        for _ in $(seq 6000); do
            now=$(date +%s%N)
            if [[ -z $synced ]] && curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
                synced=$(((now - t0) / 1000000))
            fi
            if [[ -n $synced ]]; then
                m=$(curl -fsS "http://127.0.0.1:$port/metrics" 2>/dev/null || true)
                # the queue empty and the used gauges of every GPUQuota adding up
                if awk -v pods="$2" -v nq="$SCALE_NS" '
                    /^gpuquota_controller_queue_depth / {q = $2}
                    /^gpuquota_quota_used\{namespace="scale-/ {n++; s += $2}
                    END {exit !(q == 0 && n == nq && s == pods * 1073741824)}' <<<"$m"; then
                    done_s=$(((now - t0) / 1000000))
                    a1=$(awk '{print $14 + $15}' "/proc/$apid/stat")
                    "$podcreate" metrics --kubeconfig "$KUBECONFIG" >"$out/scale-$1.m1.json"
                    break
                fi
            fi
            sleep 0.05
        done
        sleep 2
        rss=$(awk '/^VmRSS/{print $2}' "/proc/$pid/status")
        hwm=$(awk '/^VmHWM/{print $2}' "/proc/$pid/status")
        tracked=$(curl -fsS "http://127.0.0.1:$port/metrics" | awk '/^gpuquota_controller_tracked_pods /{print $2}')
        cpu=$(awk '{printf "%.2f", ($14 + $15) / 100}' "/proc/$pid/stat")
        kill -TERM "$pid"
        wait "$pid" 2>/dev/null || true
        echo "${synced:-?} ${done_s:-?} $rss $hwm $cpu ${tracked:-?}" \
            "$(awk -v a="${a1:-0}" -v b="$a0" 'BEGIN {printf "%.2f", (a - b) / 100}')"
    }
    # RSS is compared between runs that write nothing: a controller that
    # writes 1,010 statuses keeps tens of MB of transient heap resident. So
    # the baseline is the second run without pods (the first writes every
    # status), and the per-pod figure comes from the second run with pods.
    for round in 1 2; do
        read -r sync_s done_s rss0 hwm cpu _ acpu <<<"$(ctl_measure "empty$round" 0)"
        echo "  no pods, run $round: caches synced ${sync_s} ms, every GPUQuota reconciled ${done_s} ms," \
            "controller CPU ${cpu} s (kube-apiserver ${acpu} s), RSS $rss0 kB (peak $hwm kB)"
    done

    fill_start=$SECONDS
    "$podcreate" fill --kubeconfig "$KUBECONFIG" --namespaces "$scale_list" --clients 32 \
        --pods "$SCALE_PODS" --run scale --rewritten 2>&1 | sed 's/^/  /'
    echo "  filled in $((SECONDS - fill_start)) s; etcd data folder $(du -sm "$C/etcd" | cut -f1) MB;" \
        "kube-apiserver RSS $(awk '/^VmRSS/{print $2}' "/proc/$(cat "$C/kube-apiserver.pid")/status") kB"
    for round in 1 2; do
        read -r sync_s done_s rss hwm cpu tracked acpu <<<"$(ctl_measure "run$round" "$SCALE_PODS")"
        per=?
        [[ $tracked =~ ^[0-9]+$ ]] && ((tracked > 0)) && per=$(((rss - rss0) * 1024 / tracked))
        echo "  $SCALE_PODS pods, run $round: caches synced ${sync_s} ms, every GPUQuota reconciled ${done_s} ms," \
            "controller CPU ${cpu} s (kube-apiserver ${acpu} s), $tracked pods tracked," \
            "RSS $rss kB (peak $hwm kB):" \
            "$per B per tracked pod"
        [[ -f $out/scale-run$round.m1.json ]] &&
            echo "    kube-apiserver requests over the sync: $(api_requests "$out/scale-run$round.m0.json" "$out/scale-run$round.m1.json")"
    done
    # A/B against another build, in turn: each run on quotas made afresh
    # (so it writes every status), then once more (nothing to write).
    if [[ -n $SCALE_VS ]]; then
        for ((round = 1; round <= SCALE_VS_ROUNDS; round++)); do
            for side in vs this; do
                ctl_bin=$GQ
                [[ $side == vs ]] && ctl_bin=$SCALE_VS
                kubectl delete gputenantquotas --all >/dev/null
                kubectl delete gpuquotas --all -A >/dev/null
                printf '%s' "$qdocs" | kubectl apply -f - >/dev/null
                for pass in writes none; do
                    read -r sync_s done_s rss hwm cpu tracked acpu \
                        <<<"$(ctl_measure "$side$round$pass" "$SCALE_PODS")"
                    echo "  $side ($ctl_bin), round $round, $pass: caches synced ${sync_s} ms," \
                        "every GPUQuota reconciled ${done_s} ms, controller CPU ${cpu} s" \
                        "(kube-apiserver ${acpu} s), RSS $rss kB (peak $hwm kB)," \
                        "load average $(cut -d' ' -f1-3 /proc/loadavg)"
                done
            done
        done
        ctl_bin=$GQ
    fi
    ((REST_SECONDS > 0)) && at_rest
    ((CHURN_RATE > 0)) && churn_all
    echo "controller scale: $((SECONDS - scale_start)) s"
fi
((keep_out)) && echo "raw results: $out"
echo "pod-create benchmark total: $((SECONDS - started)) s"
