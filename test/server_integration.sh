#!/usr/bin/env bash
# Integration tests of the webhook's HTTPS server: `gpuquota webhook` and a
# harness with POST test routes on the same server library, each on an
# ephemeral 127.0.0.1 port with freshly generated certificates, driven by
# curl and openssl. Body size, content type and draining are tested on the
# real /mutate (mutate_integration.sh). Usage: server_integration.sh GPUQUOTA HARNESS
set -uo pipefail
gq=$1
harness=$2
work=$(mktemp -d /tmp/gq-server-it.XXXXXX)
svc=wh
ns=gq-system
host=$svc.$ns.svc
source "$(dirname "$0")/integration_lib.sh"
make_certs $svc $ns

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

check_slow_client /echo "requests served" status --max-time 2 /healthz

# Certificate swap with a request in flight: the request completes.
c "${json[@]}" --data-binary 1500 -o "$work/inflight.out" -w '%{http_code}' /slow >"$work/inflight.code" &
inflight=$!
sleep 0.3
"$gq" certs generate --service $svc --namespace $ns --out "$work/certs" --rotate >/dev/null
wait "$inflight"
check "in-flight request survives a certificate swap" 200 "$(cat "$work/inflight.code")"

kill -TERM "$h_pid"
wait "$h_pid"
check "SIGTERM: harness exits 0" 0 $?

finish
