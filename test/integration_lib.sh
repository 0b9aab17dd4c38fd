# Shared by the integration scripts that start the real binary: results,
# starting a server on an ephemeral port, and curl over TLS against the
# service DNS name. Source it after setting: work (a temporary directory),
# host (the service DNS name the certificate carries).
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
# check_grep NAME FILE PATTERN: the file has a line matching the ERE.
check_grep() { if grep -Eq -- "$3" "$2"; then pass "$1"; else fail "$1: no line matches [$3]"; fi; }

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

# wait_until SECONDS CMD...: run CMD every 50 ms until it succeeds (status
# 0) or SECONDS have passed; the status of the last run. For conditions a
# test must see before it goes on, instead of sleeping a guessed time.
wait_until() {
    local end=$((SECONDS + $1))
    shift
    until "$@"; do
        ((SECONDS >= end)) && return 1
        sleep 0.05
    done
}

# stop_server PID: SIGTERM, wait; the exit status is returned.
stop_server() {
    kill -TERM "$1"
    wait "$1"
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

# make_certs SERVICE NAMESPACE: a CA and serving pair in $work/certs.
make_certs() {
    mkdir -p "$work/certs"
    "$gq" certs generate --service "$1" --namespace "$2" --out "$work/certs" --san localhost \
        --san 127.0.0.1 >/dev/null || { echo "certs generate failed"; exit 1; }
}

# check_slow_client PATH WHAT CMD...: a client sends the headers and part of
# a body to PATH, then stalls; CMD (printing an HTTP status) must still get
# 200 five times, promptly.
check_slow_client() {
    local path=$1 what=$2
    shift 2
    (printf 'POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"partial":' "$path"
     sleep 6) | openssl s_client -quiet -connect "127.0.0.1:$port" >/dev/null 2>&1 &
    local slow_client=$!
    pids+=("$slow_client")
    sleep 0.5
    local start_ns ok=0 ms
    start_ns=$(date +%s%N)
    for _ in 1 2 3 4 5; do [[ "$("$@")" == 200 ]] && ok=$((ok + 1)); done
    ms=$((($(date +%s%N) - start_ns) / 1000000))
    check "5 $what while a client stalls mid-body" 5 "$ok"
    if [[ $ms -lt 4000 ]]; then pass "  ...promptly (${ms} ms)"; else fail "  ...took ${ms} ms"; fi
    kill "$slow_client" 2>/dev/null
}

finish() {
    echo "$failures failure(s)"
    [[ $failures -eq 0 ]]
}
