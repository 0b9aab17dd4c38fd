#!/usr/bin/env bash
# Webhook throughput/latency against the baselines (DESIGN.md §7), on this
# machine, in one run, as ratios. Usage: scripts/bench.sh BUILD_DIR
#   (a) gpuquota webhook            POST /mutate            (slot below)
#   (b) baseline, parse mode        POST, json-c parse, canned AdmissionReview
#   (c) baseline, canned mode       POST, canned AdmissionReview, no parsing
# Each runs wrk over keep-alive TLS at 16 and 64 connections; prints req/s,
# p50, p99 and the server's peak RSS (VmHWM). Figures only, no pass/fail.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
gq="$build/gpuquota"
baseline="$build/bench/bench_baseline_server"
duration=${GQ_BENCH_SECONDS:-5}
conns=(16 64)
review="$root/test/bench/data/admissionreview-pod.json"
lua="$root/test/bench/wrk.lua"

work=$(mktemp -d /tmp/gq-bench.XXXXXX)
server_pid=
cleanup() {
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
"$gq" certs generate --service gpuquota-webhook --namespace gpuquota-system --out "$work" \
    --san 127.0.0.1 >/dev/null
echo "body: $(wc -c <"$review") bytes; $(nproc) CPUs; wrk -t2, ${duration}s per run"

# start LOG CMD...: run a server, wait for its "listening on" line; sets
# server_pid and port.
start() {
    local log=$1
    shift
    "$@" >"$log" 2>&1 &
    server_pid=$!
    for _ in $(seq 100); do
        port=$(sed -n 's/.*listening on [^":]*:\([0-9][0-9]*\).*/\1/p' "$log" | head -1)
        [[ -n "$port" ]] && return 0
        sleep 0.1
    done
    echo "server did not start: $*" >&2
    cat "$log" >&2
    exit 1
}
stop() {
    kill -TERM "$server_pid"
    wait "$server_pid" || true
    server_pid=
}
hwm_kb() { awk '/^VmHWM/ {print $2}' "/proc/$server_pid/status"; }

declare -A rps p50 p99 rss
# run NAME BODY PATH: warm up, then one wrk run per connection count. BODY
# is the file to POST, or "" for GET.
run() {
    local name=$1 path=$3 url out
    export GQ_BENCH_BODY=$2
    url="https://127.0.0.1:$port$path"
    wrk -t2 -c16 -d1s -s "$lua" "$url" >/dev/null
    for c in "${conns[@]}"; do
        out=$(wrk -t2 -c"$c" -d"${duration}s" -s "$lua" "$url")
        local line
        line=$(grep '^RESULT' <<<"$out")
        if [[ "$line" != *"errors=0"* ]]; then
            echo "warning: $name c=$c: $line" >&2
        fi
        rps[$name,$c]=$(sed 's/.*rps=\([0-9.]*\).*/\1/' <<<"$line")
        p50[$name,$c]=$(sed 's/.*p50_ms=\([0-9.]*\).*/\1/' <<<"$line")
        p99[$name,$c]=$(sed 's/.*p99_ms=\([0-9.]*\).*/\1/' <<<"$line")
    done
    rss[$name]=$(hwm_kb)
}

# (a) gpuquota webhook. SLOT: once /mutate is registered in cli/cmd_webhook.c,
# replace the /healthz run with:  run a "$review" /mutate
# Until then (a) measures GET /healthz: the TLS/HTTP path without a body,
# which is NOT comparable with (b) and (c).
a_what="GET /healthz (placeholder until /mutate exists)"
start "$work/a.log" "$gq" webhook --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" \
    --listen 127.0.0.1:0
run a "" /healthz
stop

start "$work/b.log" "$baseline" --mode parse --port 0 --cert "$work/tls.crt" --key "$work/tls.key"
run b "$review" /mutate
stop

start "$work/c.log" "$baseline" --mode canned --port 0 --cert "$work/tls.crt" \
    --key "$work/tls.key"
run c "$review" /mutate
stop

printf '\n%-44s %5s %10s %9s %9s %9s\n' server conns 'req/s' 'p50 ms' 'p99 ms' 'RSS MB'
for s in a b c; do
    case $s in
    a) label="(a) gpuquota webhook: $a_what" ;;
    b) label="(b) baseline: parse with json-c + canned" ;;
    c) label="(c) baseline: canned, no parsing" ;;
    esac
    for c in "${conns[@]}"; do
        printf '%-44.44s %5s %10s %9s %9s %9.1f\n' "$label" "$c" "${rps[$s,$c]}" "${p50[$s,$c]}" \
            "${p99[$s,$c]}" "$(awk -v k="${rss[$s]}" 'BEGIN {print k / 1024}')"
    done
done
echo
for c in "${conns[@]}"; do
    awk -v a="${rps[a,$c]}" -v b="${rps[b,$c]}" -v cc="${rps[c,$c]}" -v n="$c" 'BEGIN {
        printf "c=%-3s a/b = %.2f   a/c = %.2f   b/c = %.2f (cost of parsing)\n", n, a / b, a / cc, b / cc }'
done
echo "(a/b and a/c are meaningful only once (a) runs POST /mutate)"
