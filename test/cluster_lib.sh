# Shared by the integration scripts that run gpuquota as a cluster would: the
# kube-apiserver stand-in, a real `gpuquota webhook` registered for pods and a
# real `gpuquota controller`. Source it after integration_lib.sh (gq, work,
# host set) and standin_lib.sh (S, KUBECONFIG, k).

# shellcheck source=manifests.sh
source "$(dirname "${BASH_SOURCE[0]}")/manifests.sh"

check_match() { if [[ "$3" =~ $2 ]]; then pass "$1"; else fail "$1: expected /$2/, got [$3]"; fi; }
now_ms() { date +%s%3N; }

# eventually NAME TIMEOUT_S EXPECTED CMD...: poll CMD until it prints EXPECTED.
eventually() {
    local name=$1 timeout=$2 want=$3 got start
    shift 3
    start=$(now_ms)
    while :; do
        got=$("$@" 2>/dev/null)
        [[ "$got" == "$want" ]] && { pass "$name ($(($(now_ms) - start)) ms)"; return 0; }
        (($(now_ms) - start > timeout * 1000)) && break
        sleep 0.05
    done
    fail "$name: expected [$want], got [$got] after ${timeout}s"
    return 1
}

# start_gq_webhook [ARGS...]: certificates, then `gpuquota webhook` logging to
# $work/webhook.log; waits until ready; sets wport (and port, for c/status).
start_gq_webhook() {
    make_certs "${host%%.*}" "$(echo "$host" | cut -d. -f2)"
    start "$work/webhook.log" "$gq" webhook --tls-cert "$work/certs/tls.crt" \
        --tls-key "$work/certs/tls.key" --listen 127.0.0.1:0 --threads 4 \
        --kubeconfig "$KUBECONFIG" "$@"
    wport=$port
    for _ in $(seq 100); do
        [[ "$(status /readyz)" == 200 ]] && break
        sleep 0.1
    done
    check "webhook ready" 200 "$(status /readyz)"
}

# start_gq_controller [ARGS...]: `gpuquota controller` logging to
# $work/controller.log; sets mport (its /metrics port).
start_gq_controller() {
    "$gq" controller --kubeconfig "$KUBECONFIG" --metrics-listen 127.0.0.1:0 "$@" \
        >"$work/controller.log" 2>&1 &
    pids+=($!)
    mport=
    for _ in $(seq 100); do
        mport=$(sed -n 's/.*metrics listening on port \([0-9]*\).*/\1/p' "$work/controller.log")
        [[ -n "$mport" ]] && return 0
        sleep 0.05
    done
    echo "controller did not start"
    cat "$work/controller.log"
    exit 1
}

# metric NAME: a sample of the controller's /metrics.
metric() { curl -s "http://127.0.0.1:$mport/metrics" | awk -v m="$1" '$1 == m {print $2}'; }

# register_gq_webhooks: /mutate and /validate, as deploy/webhooks.yaml
# registers them, pointing at the webhook started above.
register_gq_webhooks() {
    register_mutating_webhook "$wport"
    register_validating_webhook "$wport"
}

# register_mutating_webhook PORT / register_validating_webhook PORT: one of
# gpuquota's webhook configurations, pointing at the webhook on PORT.
register_mutating_webhook() {
    gq_webhook_yaml mutate "https://127.0.0.1:$1" "$(base64 -w0 <"$work/certs/ca.crt")" |
        k apply -f - >/dev/null
}
register_validating_webhook() {
    gq_webhook_yaml validate "https://127.0.0.1:$1" "$(base64 -w0 <"$work/certs/ca.crt")" |
        k apply -f - >/dev/null
}

# gq_pod NAMESPACE NAME-OR-PREFIX- GPU-MEMORY [extra metadata lines]: a pod
# manifest; a name ending in "-" is a generateName.
gq_pod() {
    local key=name
    [[ "$2" == *- ]] && key=generateName
    cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  $key: $2
  namespace: $1
${4:-}
spec:
  containers:
    - name: trainer
      image: trainer:1
      resources: {limits: {gpuquota.io/gpu-memory: $3}}
EOF
}

# created: the name from kubectl create's "pod/NAME created" line.
created() { sed -n 's#^pod/\(.*\) created$#\1#p'; }

# stop_all LOGS...: SIGTERM every process; each must exit cleanly and its log
# hold no sanitizer report.
stop_all() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" || fail "process $p exited with $?"; done
    pids=()
    for f in "$@"; do
        if grep -q 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error' "$work/$f"; then
            fail "$f: sanitizer report"
            grep -v '"level":"info"' "$work/$f" | head -40
        fi
    done
}
