# Shared helpers for the kube-standin shell tests.
# Usage: . lib.sh; standin_start [extra args]; ... ; (cleanup runs on exit)
set -u
STANDIN_BIN=${STANDIN_BIN:?path to kube-standin}
DATA=${DATA:?test data directory}
# kubectl's output differs between versions: use the one the e2e suite pins
# when scripts/k8s-bin.sh has built it (`make test` does), else any on PATH.
if [ -n "${SRC:-}" ] && kbin=$("$SRC/scripts/k8s-bin.sh" --cached 2>/dev/null); then
    PATH=$kbin:$PATH
fi
TMP=$(mktemp -d)
FAILS=0
CHECKS=0
SPID=""

cleanup() {
    if [ -n "$SPID" ]; then
        kill "$SPID" 2>/dev/null
        wait "$SPID" 2>/dev/null
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

# write_kubeconfig TOKEN [CA-FILE]: point kubectl at the running stand-in.
write_kubeconfig() {
    local ca=""
    [ $# -ge 2 ] && ca=", certificate-authority: \"$2\""
    cat >"$KUBECONFIG" <<KC
apiVersion: v1
kind: Config
clusters:
- name: standin
  cluster: {server: "$S"$ca}
contexts:
- name: standin
  context: {cluster: standin, user: tester, namespace: default}
current-context: standin
users:
- name: tester
  user: {token: $1}
KC
}

# Start a stand-in on an ephemeral port; sets S (base URL) and KUBECONFIG.
standin_start() {
    local scheme=http
    case " $* " in *" --tls-cert "*) scheme=https ;; esac
    "$STANDIN_BIN" --port 0 "$@" >"$TMP/out" 2>"$TMP/err" &
    SPID=$!
    for _ in $(seq 100); do
        grep -q '^listening on ' "$TMP/out" 2>/dev/null && break
        sleep 0.05
    done
    PORT=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$TMP/out")
    [ -n "$PORT" ] || { echo "standin did not start"; cat "$TMP/err"; exit 1; }
    S=$scheme://127.0.0.1:$PORT
    export KUBECONFIG=$TMP/kubeconfig
    write_kubeconfig test-token
    export HOME=$TMP # keep kubectl's discovery cache per test
}


pass() { CHECKS=$((CHECKS + 1)); }
fail() {
    CHECKS=$((CHECKS + 1))
    FAILS=$((FAILS + 1))
    echo "FAIL: $*"
}

# expect_eq NAME EXPECTED ACTUAL
expect_eq() {
    if [ "$2" == "$3" ]; then pass; else fail "$1"$'\n  expected: '"$2"$'\n  actual:   '"$3"; fi
}

# expect_match NAME REGEX ACTUAL
expect_match() {
    if [[ "$3" =~ $2 ]]; then pass; else fail "$1"$'\n  expected to match: '"$2"$'\n  actual: '"$3"; fi
}

# req METHOD PATH [BODY [CONTENT-TYPE]]: sets CODE and BODY
req() {
    local ct=${4:-application/json}
    local args=(-s -o "$TMP/body" -w '%{http_code}' -X "$1" -H "Authorization: Bearer ${TOKEN:-test-token}")
    if [ $# -ge 3 ]; then args+=(-H "Content-Type: $ct" --data-binary "$3"); fi
    CODE=$(curl "${args[@]}" ${CURL_EXTRA:-} "$S$2")
    BODY=$(cat "$TMP/body")
}

# jqb FILTER: apply jq to the last response body (compact output)
jqb() { printf '%s' "$BODY" | jq -c "$1"; }
jqr() { printf '%s' "$BODY" | jq -r "$1"; }

# stat_eventually FIELD WANT: poll /standin/stats (up to 10 s) until .FIELD == WANT; prints it.
stat_eventually() {
    local v
    for _ in $(seq 100); do
        v=$(curl -s "$S/standin/stats" | jq -c ".$1")
        [ "$v" == "$2" ] && break
        sleep 0.1
    done
    printf '%s' "$v"
}

# Stop the stand-in; its exit must be clean, with no sanitizer report
# (leaks, UB, overflows).
standin_stop() {
    [ -n "$SPID" ] || return 0
    kill "$SPID" 2>/dev/null
    wait "$SPID"
    local rc=$?
    SPID=""
    expect_eq "standin exits cleanly" 0 "$rc"
    if grep -qE 'Sanitizer|runtime error' "$TMP/err"; then
        fail "sanitizer report"
        cat "$TMP/err"
    fi
}

finish() {
    standin_stop
    echo "$CHECKS checks, $FAILS failed"
    [ "$FAILS" -eq 0 ]
}
