#!/usr/bin/env bash
# What a GPU pod create costs at the rates clusters see (issue 27;
# docs/performance.md): creates on a fixed arrival schedule (open loop: each
# create sent at its time whatever the earlier ones are doing, its latency
# taken from that time, so a slow server cannot hide its slowness by holding
# the clients back) at each rate, round-robin over 50 namespaces, through a
# real kube-apiserver. Figures only: nothing is asserted.
#
#   scripts/bench-open.sh BUILD_DIR
#
# The control plane and configurations of scripts/bench-pods.sh
# (scripts/bench-pods-lib.sh), here:
#   floor    no webhooks, no quota; pods ask aliyun.com/gpu-mem: 1
#   native   a ResourceQuota on requests.aliyun.com/gpu-mem per namespace
#   hooks-3  (W) gpuquota's webhooks, 3 replicas, nothing to charge
#   gq-3     (gq) gpuquota as deploy/ gives it: 3 webhook replicas, a GPUQuota
#            per namespace, pods ask gpuquota.io/gpu-memory: 1Gi
# gpuquota's 2 controllers (leader election) run in W and gq. Every pod fits
# its quota (the common case: a create that is admitted). Per rate, the
# configurations run in alternating order (ABBA) between rounds and rates.
# Printed per rate: creates/s reached, latency p50/p99/p99.9 from the
# scheduled time, the added latency against native and against W, and
# kube-apiserver CPU per create (scripts/bench-open-report.py).
#
#   gq-3e    gq-3 with escrow on (--escrow-pods 16; docs/validating-webhook.md)
# Each measured run follows GQ_BENCH_OPEN_WARMUP seconds (2) of creates at the
# same rate, not measured: kube-apiserver has dialled the replicas and
# everybody's caches are warm, as in a cluster that has been running.
#
# Environment: GQ_BENCH_OPEN_RATES ("20 50 100" creates/s),
# GQ_BENCH_OPEN_SECONDS (30 per run), GQ_BENCH_OPEN_WARMUP (2; 0: none),
# GQ_BENCH_OPEN_ROUNDS (1), GQ_BENCH_OPEN_CONFIGS ("floor native hooks-3 gq-3
# gq-3e"), GQ_BENCH_OUT (folder kept with the raw JSON lines; default a
# temporary one, removed).
set -euo pipefail
read -r -a RATES <<<"${GQ_BENCH_OPEN_RATES:-20 50 100}"
OPEN_SECONDS=${GQ_BENCH_OPEN_SECONDS:-30}
WARMUP=${GQ_BENCH_OPEN_WARMUP:-2}
ROUNDS=${GQ_BENCH_OPEN_ROUNDS:-1}
read -r -a configs <<<"${GQ_BENCH_OPEN_CONFIGS:-floor native hooks-3 gq-3 gq-3e}"

# shellcheck source=scripts/bench-out.sh
. "$(dirname "$0")/bench-out.sh"
bench_out bench-open "${1:-}"
started=$SECONDS

echo "== open-loop GPU pod creates through kube-apiserver at ${RATES[*]}/s, ${OPEN_SECONDS} s each, 50 namespaces"
# shellcheck source=scripts/bench-pods-lib.sh
. "$ROOT/scripts/bench-pods-lib.sh"
echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS round(s)"

# open_one ROUND CONFIG RATE: one run, one JSON line into open.jsonl.
open_one() {
    local round=$1 config=$2 rate=$3 res hard load0
    # every pod fits: the creates of one namespace (warm-up included), and one to spare
    hard=$(awk -v r="$rate" -v s="$((OPEN_SECONDS + WARMUP))" -v n="${#spread[@]}" \
        'BEGIN {print int(r * s / n) + 1}')
    state "$config"
    reset
    quotas "$config" "$hard" "${spread[@]}"
    local res_args
    read -r -a res_args <<<"$(pod_args "$config")"
    if ((WARMUP > 0)); then
        "$podcreate" run --kubeconfig "$KUBECONFIG" --namespaces "$all_ns" --clients 16 \
            --arrival-rate "$rate" --seconds "$WARMUP" --run "w$round-$config-$rate" \
            "${res_args[@]}" >/dev/null
    fi
    load0=$(cut -d' ' -f1 /proc/loadavg)
    # shellcheck disable=SC2046
    res=$("$podcreate" run --kubeconfig "$KUBECONFIG" --namespaces "$all_ns" --clients 16 \
        --arrival-rate "$rate" --seconds "$OPEN_SECONDS" --run "o$round-$config-$rate" \
        "${res_args[@]}" $(pids_of))
    printf '%s\n' "$res" | jq -c --arg round "$round" --arg config "$config" --argjson hard "$hard" \
        --arg load0 "$load0" --arg load "$(cut -d' ' -f1 /proc/loadavg)" \
        '. + {round: ($round|tonumber), config: $config, hard: $hard,
              load_before: ($load0|tonumber), load: ($load|tonumber)}' >>"$out/open.jsonl"
    printf '%s\n' "$res" | jq -r --arg c "$config" '"  \($c): \(.per_second * 10 | round / 10)/s, p50/p99/p99.9 \(.p50_ms)/\(.p99_ms)/\(.p999_ms) ms (the call alone \(.send_ms.p50)/\(.send_ms.p99)/\(.send_ms.p999) ms), dispatch lag max \(.max_lag_ms // 0) ms, the slowest due at \(.slowest_at_s | map(tostring) | join(",")) s, \(.admitted) admitted \(.denied) denied \(.errors) errors\(if .first_error then " (\(.first_error))" else "" end)"'
}

: >"$out/open.jsonl"
reverse=()
for ((i = ${#configs[@]} - 1; i >= 0; i--)); do reverse+=("${configs[i]}"); done
cell=0
for ((r = 1; r <= ROUNDS; r++)); do
    for rate in "${RATES[@]}"; do
        echo "round $r, $rate creates/s (load average $(cut -d' ' -f1-3 /proc/loadavg))"
        if ((cell % 2)); then order=("${reverse[@]}"); else order=("${configs[@]}"); fi
        for config in "${order[@]}"; do open_one "$r" "$config" "$rate"; done
        cell=$((cell + 1))
    done
done
state floor
reset
echo
python3 "$ROOT/scripts/bench-open-report.py" "$out/open.jsonl"
((keep_out)) && echo "raw results: $out"
echo "open-loop benchmark total: $((SECONDS - started)) s"
