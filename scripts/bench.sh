#!/usr/bin/env bash
# Webhook throughput/latency against the baselines (DESIGN.md §7), on this
# machine, in one run, as ratios. Usage: scripts/bench.sh BUILD_DIR
#   (a) gpuquota webhook            POST /mutate (decision, patch, audit record)
#   (b) baseline, parse mode        POST, json-c parse, canned AdmissionReview
#   (c) baseline, canned mode       POST, canned AdmissionReview, no parsing
#   (e) as (b) in (a)'s layout      one single-threaded daemon per thread on
#                                   SO_REUSEPORT sockets, where (b) has one
#                                   daemon with a thread pool
# They run side by side; each round runs wrk over keep-alive TLS at 16
# and 64 connections against each in turn (order alternating between
# rounds) and prints req/s, p50, p99, the server's CPU time per request
# (user + system, from /proc/PID/stat), wrk's own CPU time per request, and
# the round's ratios; then every round's ratios with their median, the peak
# RSS (VmHWM) and the server-side decision time from the audit records.
# Figures only, no pass/fail. GQ_BENCH_ROUNDS=N rounds (default 3),
# GQ_BENCH_SECONDS per run (default 5). GQ_BENCH_OTHER=BINARY adds (d),
# another gpuquota build with the same configuration, to the same rounds.
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
trap 'rm -rf "$work"' EXIT
"$gq" certs generate --service gpuquota-webhook --namespace gpuquota-system --out "$work" \
    --san 127.0.0.1 >/dev/null
echo "bodies: $(for r in $reviews; do printf '%s (%s B) ' "$(basename "$r" .json)" "$(wc -c <"$r")"; done)"
echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); wrk -t2, ${duration}s per run"

# start NAME LOG CMD...: run a server, wait for its "listening on" line;
# records its pid and port under NAME.
declare -A pid_of port_of
start() {
    local name=$1 log=$2 port=
    shift 2
    "$@" >"$log" 2>&1 &
    pid_of[$name]=$!
    for _ in $(seq 100); do
        port=$(sed -n 's/.*listening on [^":]*:\([0-9][0-9]*\).*/\1/p' "$log" | head -1)
        if [[ -n "$port" ]]; then
            port_of[$name]=$port
            return 0
        fi
        sleep 0.1
    done
    echo "server did not start: $*" >&2
    cat "$log" >&2
    exit 1
}
stop() {
    kill -TERM "${pid_of[$1]}"
    wait "${pid_of[$1]}" || true
    pid_of[$1]=
}
cleanup() {
    for n in "${!pid_of[@]}" server; do
        local p=${pid_of[$n]:-}
        [[ $n == server ]] && p=$server_pid
        if [[ -n "$p" ]]; then kill "$p" 2>/dev/null || true; fi
    done
    rm -rf "$work"
}
trap cleanup EXIT
hwm_kb() { awk '/^VmHWM/ {print $2}' "/proc/${pid_of[$1]}/status"; }
# CPU time of a server so far, in clock ticks (utime + stime).
cpu_ticks() { awk '{print $14 + $15}' "/proc/${pid_of[$1]}/stat"; }
# The same per thread, one "TID TICKS" line each.
thread_ticks() {
    local t
    for t in /proc/"${pid_of[$1]}"/task/*; do
        awk -v t="${t##*/}" '{print t, $14 + $15}' "$t/stat"
    done
}
hz=$(getconf CLK_TCK)

# measure NAME C: one wrk run of $duration s at C connections against
# server NAME; sets rps, p50, p99, cpu (the server's CPU µs per request)
# and wcpu (wrk's own, user + system: the client's share of the two CPUs
# differs with the size of the answers), and split: the CPU ticks of the
# server's busiest threads in the run, "A/B" for the two busiest (two
# threads taking the work in halves, or one taking all of it).
measure() {
    local name=$1 c=$2 t0 out line n th0
    t0=$(cpu_ticks "$name")
    th0=$(thread_ticks "$name")
    out=$({ /usr/bin/time -f 'WRKCPU %U %S' wrk -t2 -c"$c" -d"${duration}s" -s "$lua" \
        "https://127.0.0.1:${port_of[$name]}/mutate"; } 2>&1)
    line=$(grep '^RESULT' <<<"$out")
    if [[ "$line" != *"errors=0"* ]]; then
        echo "warning: $name c=$c: $line" >&2
    fi
    n=$(sed 's/.*requests=\([0-9]*\).*/\1/' <<<"$line")
    rps=$(sed 's/.*rps=\([0-9.]*\).*/\1/' <<<"$line")
    p50=$(sed 's/.*p50_ms=\([0-9.]*\).*/\1/' <<<"$line")
    p99=$(sed 's/.*p99_ms=\([0-9.]*\).*/\1/' <<<"$line")
    cpu=$(awk -v t="$(($(cpu_ticks "$name") - t0))" -v hz="$hz" -v n="$n" \
        'BEGIN {printf "%.0f", n ? t * 1e6 / hz / n : 0}')
    wcpu=$(awk -v n="$n" '/^WRKCPU/ {printf "%.0f", n ? ($2 + $3) * 1e6 / n : 0}' <<<"$out")
    split=$(join <(sort <<<"$th0") <(thread_ticks "$name" | sort) |
        awk '{print $3 - $2}' | sort -rn | head -2 | paste -sd/)
}

# (a) gpuquota webhook /mutate with the default configuration and an audit
# file: every request is decoded, decided, patched, encoded and audited.
# (b) and (c) the baselines. The three run side by side for the whole
# benchmark; each round measures them in turn at each connection count,
# in an order that alternates between rounds (abc, cba, ...), so the
# machine's drift falls on all three.
printf 'audit:\n  path: %s\n' "$work/audit.log" >"$work/config.yaml"
start a "$work/a.log" "$gq" webhook --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" \
    --listen 127.0.0.1:0 --config "$work/config.yaml"
start b "$work/b.log" "$baseline" --mode parse --port 0 --cert "$work/tls.crt" \
    --key "$work/tls.key"
start c "$work/c.log" "$baseline" --mode canned --port 0 --cert "$work/tls.crt" \
    --key "$work/tls.key"
start e "$work/e.log" "$baseline" --mode parse --port 0 --cert "$work/tls.crt" \
    --key "$work/tls.key" --reuseport
servers="a b c e"
if [[ -n "${GQ_BENCH_OTHER:-}" ]]; then
    # (d) another gpuquota binary (say, a build of the previous commit)
    # with the same configuration, in the same rounds: a change's effect.
    printf 'audit:\n  path: %s\n' "$work/audit-d.log" >"$work/config-d.yaml"
    start d "$work/d.log" "$GQ_BENCH_OTHER" webhook --tls-cert "$work/tls.crt" \
        --tls-key "$work/tls.key" --listen 127.0.0.1:0 --config "$work/config-d.yaml"
    servers="a b c e d"
fi
export GQ_BENCH_BODIES=$reviews
for s in $servers; do
    wrk -t2 -c16 -d1s -s "$lua" "https://127.0.0.1:${port_of[$s]}/mutate" >/dev/null
done

rounds=${GQ_BENCH_ROUNDS:-3}
declare -A ratio_ab ratio_ac ratio_ad ratio_ae tot_ab
label() {
    case $1 in
    a) echo "(a) gpuquota webhook: POST /mutate" ;;
    b) echo "(b) baseline: parse with json-c + canned" ;;
    c) echo "(c) baseline: canned, no parsing" ;;
    e) echo "(e) baseline (b), a daemon per thread" ;;
    d) echo "(d) other gpuquota: POST /mutate" ;;
    esac
}
for ((r = 1; r <= rounds; r++)); do
    order=$servers
    ((r % 2 == 0)) && order=$(tr ' ' '\n' <<<"$servers" | tac | tr '\n' ' ')
    echo
    echo "== round $r of $rounds (order ${order// /}), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    printf '%-42s %5s %9s %8s %8s %10s %10s %9s\n' server conns 'req/s' 'p50 ms' 'p99 ms' \
        'CPU us/req' 'wrk us/req' 'threads'
    declare -A R C W
    for c in "${conns[@]}"; do
        for s in $order; do
            measure "$s" "$c"
            R[$s]=$rps C[$s]=$cpu W[$s]=$wcpu
            printf '%-42.42s %5s %9s %8s %8s %10s %10s %9s\n' "$(label "$s")" "$c" "$rps" \
                "$p50" "$p99" "$cpu" "$wcpu" "$split"
        done
        ratio_ab[$r,$c]=$(awk -v a="${R[a]}" -v b="${R[b]}" 'BEGIN {printf "%.2f", a / b}')
        ratio_ac[$r,$c]=$(awk -v a="${R[a]}" -v c="${R[c]}" 'BEGIN {printf "%.2f", a / c}')
        ratio_ae[$r,$c]=$(awk -v a="${R[a]}" -v e="${R[e]}" 'BEGIN {printf "%.2f", a / e}')
        # Server and client CPU per request together: what bounds req/s
        # when the two CPUs are the limit, whatever else runs.
        tot_ab[$r,$c]=$(awk -v a="$((C[a] + W[a]))" -v b="$((C[b] + W[b]))" \
            'BEGIN {printf "%.2f", b / a}')
        echo "   c=$c: req/s a/b = ${ratio_ab[$r,$c]}  a/c = ${ratio_ac[$r,$c]}  a/e = ${ratio_ae[$r,$c]} |" \
            "server+client CPU per request b/a = ${tot_ab[$r,$c]}"
        if [[ -n "${R[d]:-}" ]]; then
            ratio_ad[$r,$c]=$(awk -v a="${R[a]}" -v d="${R[d]}" 'BEGIN {printf "%.2f", a / d}')
            echo "   c=$c: req/s a/d = ${ratio_ad[$r,$c]}"
        fi
    done
done

# summary VAR C: every round's figure, then min / median / max.
summary() {
    local -n v=$1
    local c=$2 all=()
    for ((r = 1; r <= rounds; r++)); do all+=("${v[$r,$c]}"); done
    printf '%s' "${all[*]}"
    printf '%s\n' "${all[@]}" | sort -n | awk '{ x[NR] = $1 }
        END { printf "   (min %s, median %s, max %s)\n", x[1], x[int((NR + 1) / 2)], x[NR] }'
}
echo
echo "== every round (req/s ratios in one round, same bodies, same machine load)"
for c in "${conns[@]}"; do
    echo "c=$c  a/b: $(summary ratio_ab "$c")"
    echo "c=$c  a/c: $(summary ratio_ac "$c")"
    echo "c=$c  a/e: $(summary ratio_ae "$c")"
    echo "c=$c  server+client CPU per request b/a: $(summary tot_ab "$c")"
    [[ -n "${GQ_BENCH_OTHER:-}" ]] && echo "c=$c  a/d: $(summary ratio_ad "$c")"
done
for s in $servers; do
    printf '%s peak RSS %.1f MB\n' "$(label "$s")" "$(awk -v k="$(hwm_kb "$s")" 'BEGIN {print k / 1024}')"
done
stop b
stop c
stop e
[[ -n "${GQ_BENCH_OTHER:-}" ]] && stop d
stop a # drains the audit queue
echo "(a) wrote $(wc -l <"$work/audit.log") audit records"
# Time inside the server from full body to answer, as each audit record
# has it (wrk's latency above also holds queueing behind 16-64 requests
# in flight and the client's own share of the two CPUs).
sed -n 's/.*"latencyMs":\([0-9.]*\)}$/\1/p' "$work/audit.log" | sort -n | awk '
    { v[NR] = $1 }
    END { if (NR) printf "(a) decision time per request (audit latencyMs): p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
          v[int(NR * 0.50) + 1], v[int(NR * 0.99) + 1], v[NR] }'

# ---- instructions per request under callgrind (deterministic) -------------
# instr NAME PORT CMD...: the server's instructions for a 1 s and a 6 s run
# of wrk at 4 connections; the difference per extra request. Both runs hold
# the same 4 TLS handshakes, which cancel out.
instr() {
    local name=$1 port=$2 n0 n1 i0 i1
    shift 2
    for run in 1 6; do
        valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" >/dev/null \
            2>"$work/vg-$name-$run.log" &
        server_pid=$!
        for _ in $(seq 100); do
            curl -sk -o /dev/null "https://127.0.0.1:$port/" 2>/dev/null && break
            sleep 0.2
        done
        GQ_BENCH_BODIES=$reviews wrk -t1 -c4 -d${run}s -s "$lua" \
            "https://127.0.0.1:$port/mutate" >"$work/vg-$name-$run.wrk"
        kill -TERM "$server_pid"
        wait "$server_pid" || true
        server_pid=
    done
    n0=$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' "$work/vg-$name-1.wrk")
    n1=$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' "$work/vg-$name-6.wrk")
    i0=$(grep -o 'refs: *[0-9,]*' "$work/vg-$name-1.log" | tr -dc 0-9)
    i1=$(grep -o 'refs: *[0-9,]*' "$work/vg-$name-6.log" | tr -dc 0-9)
    ins[$name]=$(((i1 - i0) / (n1 - n0)))
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
    [[ -n "${GQ_BENCH_OTHER:-}" ]] && instr d $((p + 3)) "$GQ_BENCH_OTHER" webhook \
        --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" --listen 127.0.0.1:$((p + 3)) \
        --config "$work/config-d.yaml"
    echo
    echo "instructions per request (callgrind, whole server, TLS included):"
    echo "  (a) ${ins[a]}   (b) ${ins[b]}   (c) ${ins[c]}${ins[d]:+   (d) ${ins[d]}}"
    awk -v a="${ins[a]}" -v b="${ins[b]}" -v c="${ins[c]}" 'BEGIN {
        printf "  CPU-bound throughput ratios: a/b = %.2f   a/c = %.2f\n", b / a, c / a }'
fi
