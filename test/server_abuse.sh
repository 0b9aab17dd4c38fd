#!/usr/bin/env bash
# Abuse cases against the real `gpuquota webhook` (DESIGN.md §8): the memory
# of all request bodies in flight together, half-open and slow connections,
# one peer taking every connection. Bounded: at most 1,100 connections, all
# to 127.0.0.1 (from 127.0.0.2-6 as "other peers"), about a minute.
# Usage: server_abuse.sh GPUQUOTA
set -uo pipefail
gq=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/gq-server-abuse.XXXXXX)
svc=wh
ns=gq-system
host=$svc.$ns.svc
source "$here/integration_lib.sh"
make_certs $svc $ns
# AddressSanitizer keeps freed memory in a quarantine (256 MB by default):
# RSS would measure the sanitizer, not the server.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0"

abuse() { python3 "$here/abuse_client.py" --ca "$work/certs/ca.crt" --host "$host" "$@"; }
# check_lt NAME VALUE LIMIT: VALUE is a number below LIMIT (and not negative).
check_lt() {
    if [[ "$2" =~ ^[0-9]+(\.[0-9]+)?$ ]] && python3 -c "import sys; sys.exit(not $2 < $3)"; then
        pass "$1 ($2 < $3)"
    else
        fail "$1: got [$2], want below $3"
    fi
}
metric() { c /metrics | sed -n "s/^$1 //p"; }
webhook() {
    start "$work/$1.log" "$gq" webhook --tls-cert "$work/certs/tls.crt" \
        --tls-key "$work/certs/tls.key" --listen 127.0.0.1:0 --threads 2 "${@:2}"
}

# ------------------------------------------------------------------- memory
# 40 connections each declare a 3 MiB body, send all but 100 bytes and idle.
# The default budget (32 MiB) holds ten; the others are refused at once.
webhook memory
out=$(abuse bodies --ports "$port" --pids "$pid" --count 40 --length 3145728 --hold 1.5)
check "memory: ten 3 MiB bodies fit the 32 MiB budget" 10 "$(jq .held <<<"$out")"
check "memory: the other 30 get 503 before sending their body" 30 \
    "$(jq '[.early[] | select(.status == 503)] | length' <<<"$out")"
check "memory: ...each with Retry-After: 1" 30 \
    "$(jq '[.early[] | select(.retry_after == "1")] | length' <<<"$out")"
check_lt "memory: RSS growth in MiB under 40 x 3 MiB bodies" \
    "$(jq '(.rss_peak_kib[0] - .rss_before_kib[0]) / 1024 | floor' <<<"$out")" 60
left=
for _ in $(seq 50); do
    left=$(metric gpuquota_http_body_bytes_in_flight)
    [[ "$left" == 0 ]] && break
    sleep 0.1
done
check "memory: the budget is returned when the clients go" 0 "$left"
check "memory: a review is served again" 400 \
    "$(status -H 'Content-Type: application/json' --data-binary '{}' /mutate)"
check "memory: refusals counted as 503" 30 "$(metric 'gpuquota_http_errors_total{code="503"}')"
stop_server "$pid"

# -------------------------------------------------------------- connections
# A 3 s read deadline keeps the test short; the default is 10 s.
webhook conns --read-timeout 3
out=$(abuse halfopen --port "$port" --count 1100 --sources 127.0.0.2 --probe-source 127.0.0.1 \
    --hold 6)
held=$(jq .held <<<"$out")
if ((held >= 1 && held <= 256)); then
    pass "conns: one address holds at most 256 of 1,100 half-open connections ($held)"
else
    fail "conns: one address holds $held connections: $out"
fi
check_lt "conns: /healthz from another address during that attack, ms (deadline 3 s)" \
    "$(jq .probe_ms <<<"$out")" 2000
check "conns: every half-open connection closed within deadline + 3 s" 0 \
    "$(jq .still_open_after_hold <<<"$out")"

# Five addresses, 1,100 connections: past the server's 1,024. A daemon at
# its high-water mark closes the oldest half-open connections of the
# busiest addresses (reclaim): /healthz gets in within kubelet's default 1 s
# probe timeout, not when the read deadline frees slots (8.6-9.6 s before).
out=$(abuse halfopen --port "$port" --count 1100 \
    --sources 127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6 --probe-source 127.0.0.1 \
    --probe-timeout 15 --hold 8)
probe=$(jq .probe_ms <<<"$out")
check_lt "conns: /healthz while 1,100 connections from 5 addresses fill the server, ms" \
    "$probe" 1000
check "conns: all of those closed within deadline + 5 s" 0 "$(jq .still_open_after_hold <<<"$out")"
reclaimed=$(metric gpuquota_http_connections_reclaimed_total)
check_lt "conns: connections reclaimed to make room (gpuquota_http_connections_reclaimed_total)" \
    0 "${reclaimed:-0}"

# The same with idle keep-alive connections, which no read deadline closes
# (only the 120 s idle timeout did): each of 1,100 connections from five
# addresses makes one request and then idles. Reclaim frees room at once.
out=$(abuse halfopen --mode idle --port "$port" --count 1100 \
    --sources 127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6 --probe-source 127.0.0.1 \
    --probe-timeout 15 --hold 1)
check "conns: every one of them was accepted or refused at once, none left waiting for a slot" \
    0 "$(jq .connect_failed <<<"$out")"
check_lt "conns: /healthz while 1,100 idle keep-alive connections fill the server, ms" \
    "$(jq .probe_ms <<<"$out")" 1000
check_lt "conns: idle connections reclaimed to make room" "$reclaimed" \
    "$(metric gpuquota_http_connections_reclaimed_total)"

# Connections waiting inside the TLS handshake (a client that has not
# spoken yet, or is slow to: kube-apiserver on a busy node) must cost no
# CPU while they wait. With MHD_USE_TURBO, libmicrohttpd 0.9.75 in epoll
# mode retried the handshake in a loop: each such connection held a server
# thread at 100 % until the read deadline.
out=$(abuse quiet --port "$port" --pid "$pid" --count 4 --hold 2)
check_lt "conns: server CPU seconds while 4 connections wait 2 s in the TLS handshake" \
    "$(jq .server_cpu_s <<<"$out")" 0.3
check "conns: ...and they are still open (within the read deadline)" 4 "$(jq .still_open <<<"$out")"

# Slow clients: one byte every 0.2 s, on a fresh connection and on a
# keep-alive connection after an idle pause longer than the deadline.
check_lt "conns: a client trickling one byte per 0.2 s is closed after (s)" \
    "$(abuse trickle --port "$port" --max-seconds 15 | jq .closed_after_s)" 5
check_lt "conns: ...also when it trickles a keep-alive connection's second request (s)" \
    "$(abuse trickle --port "$port" --max-seconds 15 --after-request --idle 4 |
        jq .closed_after_s)" 5
check "conns: an idle keep-alive connection outlives the read deadline" "[200,200]" \
    "$(abuse keepalive --port "$port" --idle 4 | jq -c .statuses)"
check "conns: so does one idle between the TLS handshake and its first request" "[200,200]" \
    "$(abuse keepalive --port "$port" --idle-first 4 --idle 1 | jq -c .statuses)"
timeouts=$(metric gpuquota_http_read_timeouts_total)
check_lt "conns: closures counted (gpuquota_http_read_timeouts_total >= 1100)" 1099 "${timeouts:-0}"
check_grep "conns: closures logged" "$work/conns.log" \
    '"level":"warn".*did not send a whole request within 3 s'
check "conns: /healthz after the attacks" 200 "$(status /healthz)"
stop_server "$pid"
check "conns: exits 0 after the attacks" 0 $?

finish
