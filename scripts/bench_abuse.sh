#!/usr/bin/env bash
# Figures for the webhook under attack (DESIGN.md §7-8), with 1 and 3
# replicas (processes on 127.0.0.1, the attacker spreading its connections
# over them as a Service would). Prints figures; asserts nothing (the
# bounded assertions are test/server_abuse.sh).
#   memory:      40 connections each declare a 3 MiB body, send all but 100
#                bytes and idle: RSS of each replica before and at its peak.
#   connections: 1,100 half-open connections from one address, then from
#                five, with the default limits and read deadline (10 s):
#                time to serve GET /healthz from another address, RSS.
# Usage: scripts/bench_abuse.sh BUILD_DIR   (a Release build: make bench's
# build-bench, or cmake -DCMAKE_BUILD_TYPE=Release)
set -euo pipefail
build=${1:?usage: bench_abuse.sh BUILD_DIR}
gq=$build/gpuquota
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/gq-bench-abuse.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
host=wh.gq-system.svc
"$gq" certs generate --service wh --namespace gq-system --out "$work/certs" --san 127.0.0.1 \
    >/dev/null
abuse() { python3 "$root/test/abuse_client.py" --ca "$work/certs/ca.crt" --host "$host" "$@"; }

# replicas N: start N webhooks; sets ports and wpids (comma-separated).
replicas() {
    ports=
    wpids=
    for i in $(seq "$1"); do
        "$gq" webhook --tls-cert "$work/certs/tls.crt" --tls-key "$work/certs/tls.key" \
            --listen 127.0.0.1:0 2>"$work/wh$i.log" &
        pids+=($!)
        wpids+=${wpids:+,}$!
        local port=
        for _ in $(seq 100); do
            port=$(sed -n 's/.*"listening on [^"]*:\([0-9][0-9]*\)".*/\1/p' "$work/wh$i.log")
            [[ -n "$port" ]] && break
            sleep 0.1
        done
        ports+=${ports:+,}$port
    done
}
stop_all() {
    for p in ${wpids//,/ }; do kill -TERM "$p" && wait "$p" || true; done
}
mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

echo "== memory: 40 connections x (3 MiB - 100 bytes) bodies, then idle"
for n in 1 3; do
    replicas "$n"
    out=$(abuse bodies --ports "$ports" --pids "$wpids" --count 40 --length 3145728 --hold 2)
    for i in $(seq 0 $((n - 1))); do
        printf '%d replica(s), replica %d: RSS %s MB -> peak %s MB\n' "$n" $((i + 1)) \
            "$(mb "$(jq ".rss_before_kib[$i]" <<<"$out")")" \
            "$(mb "$(jq ".rss_peak_kib[$i]" <<<"$out")")"
    done
    printf '%d replica(s): %s bodies held, %s refused with 503 + Retry-After\n' "$n" \
        "$(jq .held <<<"$out")" "$(jq '[.early[] | select(.status == 503)] | length' <<<"$out")"
    stop_all
done

echo
echo "== connections: 1,100 half-open connections, default limits (1024, 256 per address, 10 s)"
for n in 1 3; do
    for sources in 127.0.0.2 127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6; do
        replicas "$n"
        i=0
        clients=()
        for port in ${ports//,/ }; do
            pid=$(cut -d, -f$((i + 1)) <<<"$wpids")
            abuse halfopen --port "$port" --pid "$pid" --count $((1100 / n)) --sources "$sources" \
                --probe-source 127.0.0.1 --probe-timeout 30 --hold 15 >"$work/conn$i.json" &
            clients+=($!)
            i=$((i + 1))
        done
        wait "${clients[@]}"
        for j in $(seq 0 $((n - 1))); do
            out=$(cat "$work/conn$j.json")
            printf '%d replica(s), %d address(es), replica %d: %s conns, %s refused at once; ' \
                "$n" "$(tr ',' '\n' <<<"$sources" | wc -l)" $((j + 1)) \
                "$(jq .connections <<<"$out")" "$(jq .refused_at_once <<<"$out")"
            printf '/healthz in %s ms; all closed after %s s; RSS %s -> %s MB\n' \
                "$(jq .probe_ms <<<"$out")" "$(jq .closed_within_s <<<"$out")" \
                "$(mb "$(jq .rss_before_kib <<<"$out")")" "$(mb "$(jq .rss_peak_kib <<<"$out")")"
        done
        stop_all
    done
done
