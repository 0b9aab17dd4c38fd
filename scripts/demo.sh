#!/usr/bin/env bash
# The main job: show what gpuquota does with the example pods, offline and
# then through the mutating webhook over HTTPS, as kube-apiserver calls it.
set -euo pipefail
build=${1:-build}
gq="$build/gpuquota"
root=$(cd "$(dirname "$0")/.." && pwd)
echo "== gpuquota: effective default configuration"
"$gq" config default
echo
for pod in "$root"/deploy/examples/pods/*.yaml; do
    echo "== gpuquota admit deploy/examples/pods/$(basename "$pod")"
    status=0
    "$gq" admit "$pod" || status=$?
    case $status in
    0) echo "(exit 0: allowed)" ;;
    1) echo "(exit 1: denied)" ;;
    *) echo "(exit $status: bad input)" ;;
    esac
    echo
done

# Quota: the same admission against a cluster described in a state file
# (a 64Gi GPUQuota with two 24Gi trainers already running).
state="$root/deploy/examples/state"
for pod in train-16gi train-24gi; do
    echo "== gpuquota admit --state deploy/examples/state/cluster.yaml deploy/examples/state/$pod.yaml"
    status=0
    "$gq" admit --state "$state/cluster.yaml" "$state/$pod.yaml" || status=$?
    case $status in
    0) echo "(exit 0: allowed, reservation charged)" ;;
    1) echo "(exit 1: denied)" ;;
    *) echo "(exit $status: bad input)" ;;
    esac
    echo
done

# ---- the same pods through `gpuquota webhook` /mutate over TLS -------------
svc=gpuquota-webhook
ns=gpuquota-system
host=$svc.$ns.svc
work=$(mktemp -d /tmp/gq-demo.XXXXXX)
webhook_pid=
cleanup() {
    [[ -n "$webhook_pid" ]] && kill -KILL "$webhook_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "== gpuquota certs generate --service $svc --namespace $ns"
"$gq" certs generate --service $svc --namespace $ns --out "$work" --san localhost --san 127.0.0.1
echo
echo "== gpuquota webhook (embedded default configuration) on an ephemeral 127.0.0.1 port"
"$gq" webhook --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" --listen 127.0.0.1:0 \
    2>"$work/webhook.log" &
webhook_pid=$!
port=
for _ in $(seq 100); do
    port=$(sed -n 's/.*"listening on [^"]*:\([0-9][0-9]*\)".*/\1/p' "$work/webhook.log" | head -1)
    [[ -n "$port" ]] && break
    sleep 0.1
done
[[ -n "$port" ]] || { echo "the webhook did not start:"; cat "$work/webhook.log"; exit 1; }
echo "listening on 127.0.0.1:$port; calling https://$host:$port/mutate"
echo

n=0
for pod in "$root"/deploy/examples/pods/*.yaml; do
    n=$((n + 1))
    name=$(basename "$pod" .yaml)
    # The AdmissionReview kube-apiserver would send for creating the pod.
    "$gq" admit --review-only --uid "demo-$n" "$pod" >"$work/review.json"
    code=$(curl -sS --max-time 10 --cacert "$work/ca.crt" --resolve "$host:$port:127.0.0.1" \
        -H 'Content-Type: application/json' --data-binary @"$work/review.json" \
        -o "$work/response.json" -w '%{http_code}' "https://$host:$port/mutate?timeout=10s")
    resp=$(cat "$work/response.json")
    if [[ "$code" != 200 ]]; then
        echo "-- $name: HTTP $code $resp"
        continue
    fi
    if [[ "$resp" == *'"allowed":true'* ]]; then
        echo "-- $name: allowed"
    else
        echo "-- $name: denied (403): $(sed -n 's/.*"message":"\(.*\)"}}}$/\1/p' <<<"$resp" |
            sed 's/\\"/"/g')"
    fi
    sed -n 's/.*"warnings":\["\(.*\)"\].*/\1/p' <<<"$resp" | sed 's/","/\n/g' |
        sed 's/^/   warning: /'
    patch=$(sed -n 's/.*"patch":"\([^"]*\)".*/\1/p' <<<"$resp" | base64 -d)
    if [[ -n "$patch" ]]; then
        echo "   patch: $(grep -o '"op":' <<<"$patch" | wc -l) operations"
        grep -o '"op":"[a-z]*","path":"[^"]*"' <<<"$patch" |
            sed 's/"op":"\([a-z]*\)","path":"\([^"]*\)"/     \1 \2/'
    elif [[ "$resp" == *'"allowed":true'* ]]; then
        echo "   patch: none (admitted unchanged)"
    fi
    audit=$(sed -n 's/.*"auditAnnotations":{\(.*\)}}}$/\1/p' <<<"$resp")
    [[ -n "$audit" ]] && echo "   auditAnnotations: $audit"
done
echo
kill -TERM "$webhook_pid"
wait "$webhook_pid"
webhook_pid=
echo "== webhook stopped cleanly (SIGTERM); $(grep -c '"webhook":"mutate"' "$work/webhook.log") audit records were written (audit.path \"\" = stderr):"
grep '"webhook":"mutate"' "$work/webhook.log" | head -2
echo "== gpuquota audit -o summary over that log (log lines are skipped and counted):"
"$gq" audit -o summary "$work/webhook.log" 2>&1

# ---- the whole product against a kube-apiserver stand-in, driven by kubectl --
"$root/scripts/demo-cluster.sh" "$build"
