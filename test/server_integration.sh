#!/usr/bin/env bash
# Integration tests of the webhook's HTTPS server: `gpuquota webhook` and a
# harness with POST test routes on the same server library, each on an
# ephemeral 127.0.0.1 port with freshly generated certificates, driven by
# curl and openssl. Usage: server_integration.sh GPUQUOTA HARNESS
set -uo pipefail
gq=$1
harness=$2
work=$(mktemp -d /tmp/gq-server-it.XXXXXX)
svc=wh
ns=gq-system
host=$svc.$ns.svc
pids=()
failures=0

cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT

pass() { echo "ok   - $*"; }
fail() { echo "FAIL - $*"; failures=$((failures + 1)); }
# check NAME EXPECTED ACTUAL
check() { if [[ "$2" == "$3" ]]; then pass "$1"; else fail "$1: expected [$2], got [$3]"; fi; }

# start LOG CMD...: run in the background, wait for the "listening on" line,
# set $pid and $port.
start() {
    local log=$1
    shift
    "$@" 2>"$log" &
    pid=$!
    pids+=("$pid")
    port=
    for _ in $(seq 100); do
        port=$(sed -n 's/.*"listening on [^"]*:\([0-9][0-9]*\)".*/\1/p' "$log" | head -1)
        [[ -n "$port" ]] && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "server did not start:"; cat "$log"
    exit 1
}

# c ARGS... PATH: curl over TLS against the service name, verifying with the CA.
c() {
    local path=${*: -1}
    curl -sS --max-time 10 --cacert "$work/certs/ca.crt" --resolve "$host:$port:127.0.0.1" \
        "${@:1:$#-1}" "https://$host:$port$path"
}
status() { c -o /dev/null -w '%{http_code}' "$@"; }
served_serial() {
    openssl s_client -connect "127.0.0.1:$port" -servername "$host" </dev/null 2>/dev/null |
        openssl x509 -noout -serial
}

mkdir -p "$work/certs"
"$gq" certs generate --service $svc --namespace $ns --out "$work/certs" --san localhost \
    --san 127.0.0.1 >/dev/null || { echo "certs generate failed"; exit 1; }

# ------------------------------------------------------------ gpuquota webhook
start "$work/webhook.log" "$gq" webhook --tls-cert "$work/certs/tls.crt" \
    --tls-key "$work/certs/tls.key" --listen 127.0.0.1:0 --threads 2
wh_pid=$pid
check "healthz" "ok 200" "$(c -w ' %{http_code}' /healthz)"
check "readyz" "ok 200" "$(c -w ' %{http_code}' /readyz)"
check "metrics content type" "text/plain; version=0.0.4; charset=utf-8" \
    "$(c -o /dev/null -w '%{content_type}' /metrics)"
check "metrics build_info" 'gpuquota_build_info{version="0.1.0"} 1' \
    "$(c /metrics | grep '^gpuquota_build_info')"
check "405 for POST to a GET route" 405 "$(status -X POST -d x /healthz)"
check "405 names the allowed method" "Allow: GET, HEAD" \
    "$(c -D - -o /dev/null -X DELETE /readyz | tr -d '\r' | grep '^Allow:')"
check "404 for an unknown path" 404 "$(status /nope)"
check "404 body is small JSON" '{"code":404,"message":"no handler for this path"}' "$(c /nope)"
check "errors counted by code" 'gpuquota_http_errors_total{code="404"} 2
gpuquota_http_errors_total{code="405"} 2' "$(c /metrics | grep '^gpuquota_http_errors_total')"

# Plain HTTP to the TLS port: the connection fails, the server carries on.
if curl -sS --max-time 5 "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then
    fail "plain HTTP to the TLS port must fail"
else
    pass "plain HTTP to the TLS port fails"
fi
check "healthz after plain HTTP" 200 "$(status /healthz)"

# TLS versions. The client is allowed to offer TLS 1.1 (SECLEVEL=0) so a
# failure is the server's refusal, not the client's own policy.
out=$(c --tlsv1.1 --tls-max 1.1 --ciphers 'DEFAULT:@SECLEVEL=0' /healthz 2>&1)
rc=$?
if [[ $rc -ne 0 && "$out" != *"no protocols available"* ]]; then
    pass "TLS 1.1 refused by the server"
else
    fail "TLS 1.1: rc=$rc $out"
fi
check "TLS 1.2 works" 200 "$(status --tlsv1.2 --tls-max 1.2 /healthz)"
check "TLS 1.3 works" 200 "$(status --tlsv1.3 /healthz)"
check "TLS 1.2 negotiated" "TLSv1.2" "$(openssl s_client -connect 127.0.0.1:$port -tls1_2 \
    </dev/null 2>/dev/null | sed -n 's/^ *Protocol *: *//p')"

# Certificate swapped on disk: new connections get it, without a restart.
old_serial=$(served_serial)
check "serves tls.crt" "$(openssl x509 -noout -serial -in "$work/certs/tls.crt")" "$old_serial"
"$gq" certs generate --service $svc --namespace $ns --out "$work/certs" --san 127.0.0.1 \
    --rotate >/dev/null
new_serial=$(openssl x509 -noout -serial -in "$work/certs/tls.crt")
got=
for _ in $(seq 50); do
    got=$(served_serial)
    [[ "$got" == "$new_serial" ]] && break
    sleep 0.1
done
check "rotated certificate served without restart" "$new_serial" "$got"
check "healthz verifies with the same CA after rotation" 200 "$(status /healthz)"
grep -q '"reloaded TLS certificate from ' "$work/webhook.log" && pass "reload logged" ||
    fail "reload logged"

# A broken pair on disk is refused and the old one kept.
cp "$work/certs/tls.key" "$work/tls.key.good"
cp "$work/certs/ca.key" "$work/certs/tls.key.tmp" && mv "$work/certs/tls.key.tmp" "$work/certs/tls.key"
sleep 1.5
check "broken pair: still serving the previous certificate" "$new_serial" "$(served_serial)"
grep -q 'certificate reload failed, keeping the previous certificate' "$work/webhook.log" &&
    pass "broken pair logged" || fail "broken pair logged"
cp "$work/tls.key.good" "$work/certs/tls.key.tmp" && mv "$work/certs/tls.key.tmp" "$work/certs/tls.key"

kill -HUP "$wh_pid"
sleep 0.2
check "SIGHUP does not stop the server" 200 "$(status /healthz)"
kill -TERM "$wh_pid"
wait "$wh_pid"
check "SIGTERM: gpuquota webhook exits 0" 0 $?
grep -q '"stopped"' "$work/webhook.log" && pass "stop logged" || fail "stop logged"

# ------------------------------------------------- POST routes (test harness)
start "$work/harness.log" "$harness" "$work/certs/tls.crt" "$work/certs/tls.key" 127.0.0.1:0
h_pid=$pid
json=(-H 'Content-Type: application/json')
check "POST JSON echoed" '{"a":1}' "$(c "${json[@]}" --data-binary '{"a":1}' /echo)"
check "415 for text/plain" 415 "$(status -H 'Content-Type: text/plain' --data-binary '{}' /echo)"
check "415 body" '{"code":415,"message":"content type text/plain not supported; use application/json"}' \
    "$(c -H 'Content-Type: text/plain' --data-binary '{}' /echo)"
head -c $((4 * 1024 * 1024)) /dev/zero | tr '\0' 'a' >"$work/4mib"
check "413 for a 4 MiB body (Content-Length)" 413 \
    "$(status "${json[@]}" --data-binary @"$work/4mib" /echo)"
check "413 for a 4 MiB chunked body" 413 \
    "$(status "${json[@]}" -H 'Transfer-Encoding: chunked' --data-binary @"$work/4mib" /echo)"
check "healthz after oversized bodies" 200 "$(status /healthz)"

# A slow client (headers and part of a body, then silence) does not block others.
(printf 'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"partial":'
 sleep 6) | openssl s_client -quiet -connect "127.0.0.1:$port" >/dev/null 2>&1 &
slow_client=$!
pids+=("$slow_client")
sleep 0.5
start_ns=$(date +%s%N)
ok=0
for _ in 1 2 3 4 5; do [[ "$(status --max-time 2 /healthz)" == 200 ]] && ok=$((ok + 1)); done
ms=$((($(date +%s%N) - start_ns) / 1000000))
check "5 requests served while a client stalls mid-body" 5 "$ok"
[[ $ms -lt 4000 ]] && pass "  ...promptly (${ms} ms)" || fail "  ...took ${ms} ms"
kill "$slow_client" 2>/dev/null

# Certificate swap with a request in flight: the request completes.
c "${json[@]}" --data-binary 1500 -o "$work/inflight.out" -w '%{http_code}' /slow >"$work/inflight.code" &
inflight=$!
sleep 0.3
"$gq" certs generate --service $svc --namespace $ns --out "$work/certs" --rotate >/dev/null
wait "$inflight"
check "in-flight request survives a certificate swap" 200 "$(cat "$work/inflight.code")"

# SIGTERM drains an in-flight slow request, then exits 0.
c "${json[@]}" --data-binary 1500 -o "$work/drain.out" -w '%{http_code}' /slow >"$work/drain.code" &
inflight=$!
sleep 0.3
kill -TERM "$h_pid"
sleep 0.3
if curl -sS --max-time 2 --cacert "$work/certs/ca.crt" --resolve "$host:$port:127.0.0.1" \
    "https://$host:$port/healthz" >/dev/null 2>&1; then
    fail "new connections refused while draining"
else
    pass "new connections refused while draining"
fi
wait "$inflight"
check "in-flight request finished during drain" 200 "$(cat "$work/drain.code")"
check "in-flight response body" '{"slept":true}' "$(cat "$work/drain.out")"
wait "$h_pid"
check "SIGTERM: harness exits 0 after draining" 0 $?

echo "$failures failure(s)"
[[ $failures -eq 0 ]]
