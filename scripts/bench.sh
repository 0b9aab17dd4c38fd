#!/usr/bin/env bash
# Webhook throughput/latency against the baselines (DESIGN.md §7), on this
# machine, in one run, as ratios. Usage: scripts/bench.sh BUILD_DIR
#   (a) gpuquota webhook            POST /mutate (decision, patch, audit record)
#   (b) baseline, parse mode        POST, json-c parse, canned AdmissionReview
#   (c) baseline, canned mode       POST, canned AdmissionReview, no parsing
# Each runs wrk over keep-alive TLS at 16 and 64 connections; prints req/s,
# p50, p99, the server's CPU time per request (user + system, from
# /proc/PID/stat: unlike req/s it does not depend on what else the machine
# runs) and its peak RSS (VmHWM). Figures only, no pass/fail.
# GQ_BENCH_ROUNDS=N repeats the whole comparison N times (default 1).
# Then, when valgrind is installed (GQ_BENCH_INSTRUCTIONS=0 skips it), each
# server runs under callgrind for a few hundred requests: instructions per
# request of the whole process, all threads, TLS included. That figure is
# exact and repeatable on a machine busy with other work, where req/s and
# even CPU time per request move by tens of percent between runs.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
gq="$build/gpuquota"
baseline="$build/bench/bench_baseline_server"
duration=${GQ_BENCH_SECONDS:-5}
conns=(16 64)
# Four realistic ~5 KB pod reviews sent in rotation: a GPU fraction, a memory
# request, a fraction pinned to a model by annotation, whole GPUs.
reviews=$(ls "$root"/test/bench/data/review-*.json | tr '\n' ' ')
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
echo "bodies: $(for r in $reviews; do printf '%s (%s B) ' "$(basename "$r" .json)" "$(wc -c <"$r")"; done)"
echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); wrk -t2, ${duration}s per run"

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
# CPU time of the server so far, in clock ticks (utime + stime).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }
hz=$(getconf CLK_TCK)

declare -A rps p50 p99 rss cpu
# run NAME BODIES PATH: warm up, then one wrk run per connection count.
# BODIES are the files to POST in rotation, or "" for GET.
run() {
    local name=$1 path=$3 url out
    export GQ_BENCH_BODIES=$2
    url="https://127.0.0.1:$port$path"
    wrk -t2 -c16 -d1s -s "$lua" "$url" >/dev/null
    for c in "${conns[@]}"; do
        local t0
        t0=$(cpu_ticks)
        out=$(wrk -t2 -c"$c" -d"${duration}s" -s "$lua" "$url")
        local line
        line=$(grep '^RESULT' <<<"$out")
        if [[ "$line" != *"errors=0"* ]]; then
            echo "warning: $name c=$c: $line" >&2
        fi
        rps[$name,$c]=$(sed 's/.*rps=\([0-9.]*\).*/\1/' <<<"$line")
        p50[$name,$c]=$(sed 's/.*p50_ms=\([0-9.]*\).*/\1/' <<<"$line")
        p99[$name,$c]=$(sed 's/.*p99_ms=\([0-9.]*\).*/\1/' <<<"$line")
        cpu[$name,$c]=$(awk -v t="$(($(cpu_ticks) - t0))" -v hz="$hz" \
            -v n="$(sed 's/.*requests=\([0-9]*\).*/\1/' <<<"$line")" \
            'BEGIN {printf "%.0f", n ? t * 1e6 / hz / n : 0}')
    done
    rss[$name]=$(hwm_kb)
}

# (a) gpuquota webhook /mutate with the default configuration and an audit
# file: every request is decoded, decided, patched, encoded and audited.
a_what="POST /mutate"
printf 'audit:\n  path: %s\n' "$work/audit.log" >"$work/config.yaml"

one_round() {
    rm -f "$work/audit.log"
    start "$work/a.log" "$gq" webhook --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" \
        --listen 127.0.0.1:0 --config "$work/config.yaml"
    run a "$reviews" /mutate
    stop # drains the audit queue
    audited=$(wc -l <"$work/audit.log")

    start "$work/b.log" "$baseline" --mode parse --port 0 --cert "$work/tls.crt" \
        --key "$work/tls.key"
    run b "$reviews" /mutate
    stop

    start "$work/c.log" "$baseline" --mode canned --port 0 --cert "$work/tls.crt" \
        --key "$work/tls.key"
    run c "$reviews" /mutate
    stop

    printf '\n%-44s %5s %9s %8s %8s %9s %7s\n' server conns 'req/s' 'p50 ms' 'p99 ms' \
        'CPU us/req' 'RSS MB'
    for s in a b c; do
        case $s in
        a) label="(a) gpuquota webhook: $a_what" ;;
        b) label="(b) baseline: parse with json-c + canned" ;;
        c) label="(c) baseline: canned, no parsing" ;;
        esac
        for c in "${conns[@]}"; do
            printf '%-44.44s %5s %9s %8s %8s %9s %7.1f\n' "$label" "$c" "${rps[$s,$c]}" \
                "${p50[$s,$c]}" "${p99[$s,$c]}" "${cpu[$s,$c]}" \
                "$(awk -v k="${rss[$s]}" 'BEGIN {print k / 1024}')"
        done
    done
    echo
    for c in "${conns[@]}"; do
        awk -v a="${rps[a,$c]}" -v b="${rps[b,$c]}" -v cc="${rps[c,$c]}" -v n="$c" \
            -v ca="${cpu[a,$c]}" -v cb="${cpu[b,$c]}" -v ccc="${cpu[c,$c]}" 'BEGIN {
            printf "c=%-3s req/s: a/b = %.2f  a/c = %.2f  b/c = %.2f | server CPU per request: b/a = %.2f  c/a = %.2f\n",
                n, a / b, a / cc, b / cc, cb / ca, ccc / ca }'
    done
    echo "(a) wrote $audited audit records for $((${rps[a,16]:-0} * duration + ${rps[a,64]:-0} * duration)) measured requests (plus warm-up)"
    # Time inside the server from full body to answer, as each audit record
    # has it (wrk's latency above also holds queueing behind 16-64 requests
    # in flight and the client's own share of the two CPUs).
    sed -n 's/.*"latencyMs":\([0-9.]*\)}$/\1/p' "$work/audit.log" | sort -n | awk '
        { v[NR] = $1 }
        END { if (NR) printf "(a) decision time per request (audit latencyMs): p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
              v[int(NR * 0.50) + 1], v[int(NR * 0.99) + 1], v[NR] }'
}

for ((r = 1; r <= ${GQ_BENCH_ROUNDS:-1}; r++)); do
    [[ ${GQ_BENCH_ROUNDS:-1} -gt 1 ]] && echo && echo "== round $r, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    one_round
done

# ---- instructions per request under callgrind (deterministic) -------------
# instr NAME PORT CMD...: the server's instructions for a run with one
# request and for a run of wrk; the difference per extra request.
instr() {
    local name=$1 port=$2 n i0 i1
    shift 2
    for run in 1 many; do
        valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" >/dev/null \
            2>"$work/vg-$name-$run.log" &
        server_pid=$!
        for _ in $(seq 100); do
            curl -sk -o /dev/null "https://127.0.0.1:$port/" 2>/dev/null && break
            sleep 0.2
        done
        if [[ $run == 1 ]]; then
            curl -sk -H 'Content-Type: application/json' --data-binary @"${reviews%% *}" \
                -o /dev/null "https://127.0.0.1:$port/mutate"
        else
            GQ_BENCH_BODIES=$reviews wrk -t1 -c4 -d6s -s "$lua" "https://127.0.0.1:$port/mutate" \
                >"$work/vg-$name.wrk"
        fi
        stop
    done
    n=$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' "$work/vg-$name.wrk")
    i0=$(grep -o 'refs: *[0-9,]*' "$work/vg-$name-1.log" | tr -dc 0-9)
    i1=$(grep -o 'refs: *[0-9,]*' "$work/vg-$name-many.log" | tr -dc 0-9)
    ins[$name]=$(((i1 - i0) / (n - 1)))
}
if [[ ${GQ_BENCH_INSTRUCTIONS:-1} != 0 ]] && command -v valgrind >/dev/null; then
    declare -A ins
    p=$((20000 + RANDOM % 20000))
    instr a $p "$gq" webhook --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" \
        --listen 127.0.0.1:$p --config "$work/config.yaml"
    instr b $((p + 1)) "$baseline" --mode parse --port $((p + 1)) --cert "$work/tls.crt" \
        --key "$work/tls.key"
    instr c $((p + 2)) "$baseline" --mode canned --port $((p + 2)) --cert "$work/tls.crt" \
        --key "$work/tls.key"
    echo
    echo "instructions per request (callgrind, whole server, TLS included):"
    echo "  (a) ${ins[a]}   (b) ${ins[b]}   (c) ${ins[c]}"
    awk -v a="${ins[a]}" -v b="${ins[b]}" -v c="${ins[c]}" 'BEGIN {
        printf "  CPU-bound throughput ratios: a/b = %.2f   a/c = %.2f\n", b / a, c / a }'
fi
