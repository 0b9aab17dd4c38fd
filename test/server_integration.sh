#!/usr/bin/env bash
# Integration tests of the webhook's HTTPS server: `gpuquota webhook` and a
# harness with POST test routes on the same server library, each on an
# ephemeral 127.0.0.1 port with freshly generated certificates, driven by
# curl and openssl: TLS versions, certificate reload and its validity
# warnings, client certificates, a port already in use. Body size, content
# type and draining are tested on the real /mutate (mutate_integration.sh);
# memory and connection abuse in server_abuse.sh.
# Usage: server_integration.sh GPUQUOTA HARNESS
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

# Connections accepted: one per curl (each a TLS handshake), one for two
# requests on a kept-alive connection.
conns() { c /metrics | sed -n 's/^gpuquota_http_connections_total //p'; }
n0=$(conns)
c /healthz >/dev/null
c /readyz >/dev/null
check "connections counted, one per client connection" $((n0 + 3)) "$(conns)"
curl -sS --max-time 10 --cacert "$work/certs/ca.crt" --resolve "$host:$port:127.0.0.1" \
    "https://$host:$port/healthz" "https://$host:$port/readyz" >/dev/null
check "two requests on one kept-alive connection count once" $((n0 + 5)) "$(conns)"

# The serving certificate's validity: logged at start, expiry in /metrics.
not_after() { date -u -d "$(openssl x509 -noout -enddate -in "$1" | cut -d= -f2)" +%s; }
rfc3339() { date -u -d "$(openssl x509 -noout "-$2" -in "$1" | cut -d= -f2)" +%Y-%m-%dT%H:%M:%SZ; }
check "certificate expiry in /metrics" "$(not_after "$work/certs/tls.crt")" \
    "$(c /metrics | sed -n 's/^gpuquota_tls_certificate_expiry_timestamp_seconds //p')"
check_grep "certificate validity logged at start" "$work/webhook.log" \
    "loaded TLS certificate from $work/certs/tls.crt \\(notBefore $(rfc3339 "$work/certs/tls.crt" \
    startdate), notAfter $(rfc3339 "$work/certs/tls.crt" enddate)\\)"

# A port already in use: one clear line of ours, nothing from libmicrohttpd.
"$gq" webhook --tls-cert "$work/certs/tls.crt" --tls-key "$work/certs/tls.key" \
    --listen "127.0.0.1:$port" --threads 2 2>"$work/busy.log"
check "port in use: exit status 1" 1 $?
check "port in use: one error line with address, port and reason" \
    "cannot listen on 127.0.0.1:$port: Address already in use" \
    "$(jq -r 'select(.level == "error" or .level == "warn" and (.msg | test("http|bind"))) | .msg' \
        "$work/busy.log")"
check "port in use: no libmicrohttpd message" 0 "$(grep -ci 'failed to bind' "$work/busy.log")"

# One listening socket per server thread, sharing the port (SO_REUSEPORT):
# the kernel spreads new connections over the threads. A second server,
# itself with two threads, was refused above all the same.
listeners() {
    awk -v p=":$(printf '%04X' "$1")" '$4 == "0A" && substr($2, length($2) - 4) == p' \
        /proc/net/tcp /proc/net/tcp6 | wc -l
}
check "two threads: two listening sockets on the port" 2 "$(listeners "$port")"
"$gq" webhook --tls-cert "$work/certs/tls.crt" --tls-key "$work/certs/tls.key" \
    --listen "127.0.0.1:$port" --threads 1 2>"$work/busy1.log"
check "port in use, one thread: refused too" \
    "cannot listen on 127.0.0.1:$port: Address already in use" \
    "$(jq -r 'select(.level == "error") | .msg' "$work/busy1.log")"

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

# A reply over TLS leaves in one TCP segment, headers and body together, on
# a keep-alive connection: libmicrohttpd alone pushes the headers of a body
# of 1400 bytes or more on their own, a second packet and client wake-up.
# The kernel lets a cork hold data 200 ms at most, so a server stalled that
# long (a loaded machine) splits one reply: up to three tries.
segs=
for _ in 1 2 3; do
    segs=$(python3 "$(dirname "$0")/reply_segments.py" "$port" "$work/certs/ca.crt" "$host" \
        /mutate "$(dirname "$0")/bench/data/review-fraction.json" 20 |
        awk '{ print ($1 >= 1400 ? "large" : "small " $1), $2 }')
    [[ "$segs" == "large 20" ]] && break
done
check "20 keep-alive /mutate replies of 1.4 KB or more: one TCP segment each" "large 20" "$segs"

kill -HUP "$wh_pid"
sleep 0.2
check "SIGHUP does not stop the server" 200 "$(status /healthz)"
kill -TERM "$wh_pid"
wait "$wh_pid"
check "SIGTERM: gpuquota webhook exits 0" 0 $?
grep -q '"stopped"' "$work/webhook.log" && pass "stop logged" || fail "stop logged"

# -------------------------------------------- certificates outside validity
# sign KEY OUT ARGS...: a serving certificate for KEY signed by the test CA.
sign() {
    openssl req -new -key "$1" -subj "/CN=$host" 2>/dev/null |
        openssl x509 -req -CA "$work/certs/ca.crt" -CAkey "$work/certs/ca.key" -out "$2" "${@:3}" \
            2>/dev/null
}
# sign_future KEY OUT: valid from 2040 only (openssl x509 cannot set notBefore).
sign_future() {
    local d=$work/cadb
    mkdir -p "$d" && : >"$d/index.txt" && echo 01 >"$d/serial"
    printf '[ca]\ndefault_ca=d\n[d]\ndatabase=%s\nnew_certs_dir=%s\nserial=%s\n%s\n' \
        "$d/index.txt" "$d" "$d/serial" 'default_md=sha256
policy=p
[p]
commonName=supplied' >"$d/ca.cnf"
    openssl req -new -key "$1" -subj "/CN=$host" 2>/dev/null >"$d/req.csr"
    openssl ca -batch -notext -config "$d/ca.cnf" -cert "$work/certs/ca.crt" \
        -keyfile "$work/certs/ca.key" -in "$d/req.csr" -startdate 20400101000000Z \
        -enddate 20410101000000Z -out "$2" 2>/dev/null
}
mkdir -p "$work/old"
cp "$work/certs/tls.key" "$work/old/tls.key"
sign "$work/old/tls.key" "$work/old/tls.crt" -days -1 # notAfter before notBefore: expired
start "$work/expired.log" "$gq" webhook --tls-cert "$work/old/tls.crt" \
    --tls-key "$work/old/tls.key" --listen 127.0.0.1:0 --threads 1
exp_pid=$pid
check_grep "expired certificate: warned at start, with file and dates" "$work/expired.log" \
    "\"level\":\"warn\".*TLS certificate $work/old/tls.crt has expired \\(notBefore \
$(rfc3339 "$work/old/tls.crt" startdate), notAfter $(rfc3339 "$work/old/tls.crt" enddate)\\)"
check "expired certificate: its expiry in /metrics" "$(not_after "$work/old/tls.crt")" \
    "$(curl -sk --max-time 5 "https://127.0.0.1:$port/metrics" |
        sed -n 's/^gpuquota_tls_certificate_expiry_timestamp_seconds //p')"
sign_future "$work/old/tls.key" "$work/old/next.crt"
mv "$work/old/next.crt" "$work/old/tls.crt"
for _ in $(seq 50); do
    grep -q 'is not valid yet' "$work/expired.log" && break
    sleep 0.1
done
check_grep "not-yet-valid certificate: warned on reload" "$work/expired.log" \
    "\"level\":\"warn\".*TLS certificate $work/old/tls.crt is not valid yet \\(notBefore \
2040-01-01T00:00:00Z, notAfter 2041-01-01T00:00:00Z\\)"
check "not-yet-valid certificate: the new expiry in /metrics" "$(not_after "$work/old/tls.crt")" \
    "$(curl -sk --max-time 5 "https://127.0.0.1:$port/metrics" |
        sed -n 's/^gpuquota_tls_certificate_expiry_timestamp_seconds //p')"
stop_server "$exp_pid"

# ------------------------------------------------------ client certificates
# client NAME CA_DIR CN [EKU]: a client key and certificate signed by the CA
# in CA_DIR (clientAuth unless EKU says otherwise).
client() {
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/$1.key" \
        -subj "/CN=$3" 2>/dev/null |
        openssl x509 -req -CA "$2/ca.crt" -CAkey "$2/ca.key" -days 2 -out "$work/$1.crt" \
            -extfile <(printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=%s\n' \
                "${4:-clientAuth}") 2>/dev/null
}
for ca in apiserver-ca other-ca; do
    mkdir -p "$work/$ca"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -keyout "$work/$ca/ca.key" -out "$work/$ca/ca.crt" -subj "/CN=$ca" 2>/dev/null
done
client good "$work/apiserver-ca" kube-apiserver
client stranger "$work/other-ca" kube-apiserver
client wrongcn "$work/apiserver-ca" tenant
client serveronly "$work/apiserver-ca" kube-apiserver serverAuth
cp "$work/apiserver-ca/ca.crt" "$work/client-ca.crt"
start "$work/mtls.log" "$gq" webhook --tls-cert "$work/certs/tls.crt" \
    --tls-key "$work/certs/tls.key" --listen 127.0.0.1:0 --threads 2 \
    --client-ca "$work/client-ca.crt" --client-cn kube-apiserver --client-cn other-name
mtls_pid=$pid
review() { c -H 'Content-Type: application/json' --data-binary '{}' "$@" /mutate; }
as() { [[ $1 == none ]] || echo "--cert $work/$1.crt --key $work/$1.key"; }
# shellcheck disable=SC2046
{
    check "client cert: none -> 403" \
        '{"code":403,"message":"client certificate not accepted: none presented"}' "$(review)"
    check "client cert: from another CA -> 403" 403 "$(review $(as stranger) -o /dev/null \
        -w '%{http_code}')"
    check_grep "client cert: the reason is logged" "$work/mtls.log" \
        'HTTP 403 for POST /mutate .*: client certificate not accepted: The certificate is NOT trusted'
    check "client cert: a CN not allowed -> 403" \
        '{"code":403,"message":"client certificate not accepted: CN \"tenant\" is not an allowed client"}' \
        "$(review $(as wrongcn))"
    check "client cert: without the clientAuth purpose -> 403" 403 \
        "$(review $(as serveronly) -o /dev/null -w '%{http_code}')"
    # 400: the handler itself answered (the review is empty).
    check "client cert: from the client CA -> the handler answers" 400 \
        "$(review $(as good) -o /dev/null -w '%{http_code}')"
    for path in /healthz /readyz /metrics; do
        check "client cert: $path needs none" 200 "$(status "$path")"
    done
    check "client cert: refusals counted" 'gpuquota_http_errors_total{code="403"} 4' \
        "$(c /metrics | grep 'code="403"')"
    # The CA bundle is reloaded with the serving pair.
    cp "$work/other-ca/ca.crt" "$work/client-ca.new" && mv "$work/client-ca.new" "$work/client-ca.crt"
    got=
    for _ in $(seq 50); do
        got=$(review $(as stranger) -o /dev/null -w '%{http_code}')
        [[ $got == 400 ]] && break
        sleep 0.1
    done
    check "client CA reloaded: the new CA's client is accepted" 400 "$got"
    check "client CA reloaded: the old CA's client is refused" 403 \
        "$(review $(as good) -o /dev/null -w '%{http_code}')"
}
stop_server "$mtls_pid"
check "client cert: exits 0" 0 $?

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
