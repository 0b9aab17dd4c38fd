#!/usr/bin/env bash
# deploy/monitoring against what gpuquota really exposes: the /metrics of the
# running webhook replicas and controllers are scraped while GPU pods are
# admitted and denied, and every metric and label the Grafana dashboard and
# the Prometheus rules use must be among them (test/monitoring_check.py).
# The samples are kept under $GQ_E2E_DIR/monitoring/ (one folder per scrape
# round), from which scripts/dashboard_png.py draws the dashboard's panels.
source "$ROOT/test/e2e/lib.sh"
mon=$E2E/monitoring
rm -rf "$mon"
mkdir -p "$mon"
trap 'kill "$(cat "$E2E/aux-monitoring.pid" 2>/dev/null)" 2>/dev/null; rm -f "$E2E/aux-monitoring.pid"
      kubectl delete namespace e2e-mon e2e-monq --wait=false >/dev/null 2>&1' EXIT

# One more webhook replica, not registered with kube-apiserver and without
# client-certificate checks, to receive what kube-apiserver never sends: a
# body that is not an AdmissionReview (counted as decision="error", HTTP 400).
from=$(stat -c %s "$E2E/webhook-monitoring.log" 2>/dev/null || echo 0)
"$GQ" webhook --tls-cert "$E2E/certs/tls.crt" --tls-key "$E2E/certs/tls.key" \
    --listen "127.0.0.1:0" --config "$E2E/config.yaml" --kubeconfig "$E2E/webhook.kubeconfig" \
    >>"$E2E/webhook-monitoring.log" 2>&1 &
echo $! >"$E2E/aux-monitoring.pid"
port=$(logged_port "$E2E/webhook-monitoring.log" "$from") || fail "the extra webhook logged no port"
aux() { curl -sS --cacert "$E2E/certs/ca.crt" --resolve "gpuquota-webhook.$NS_SYS.svc:$port:127.0.0.1" \
    "https://gpuquota-webhook.$NS_SYS.svc:$port$1" "${@:2}"; }
eventually 30 aux /readyz || fail "the extra webhook did not become ready"

# wh_metrics PORT-FILE: /metrics of the webhook replica whose port the file holds.
wh_metrics() {
    local p
    p=$(cat "$1")
    curl -fsS --cacert "$E2E/certs/ca.crt" --resolve "gpuquota-webhook.$NS_SYS.svc:$p:127.0.0.1" \
        "https://gpuquota-webhook.$NS_SYS.svc:$p/metrics"
}

# scrape ROUND: every webhook's and controller's /metrics into $mon/ROUND/.
scrape() {
    local dir=$mon/$1 f p n=0
    mkdir -p "$dir"
    for f in "$E2E"/webhook-*.port; do
        wh_metrics "$f" >"$dir/webhook-$(basename "$f" .port).prom" && n=$((n + 1))
    done
    aux /metrics >"$dir/webhook-extra.prom" && n=$((n + 1))
    for f in "$E2E"/controller-*.log; do
        p=$(grep -o 'metrics listening on port [0-9]*' "$f" | tail -1 | awk '{print $5}')
        [[ -n $p ]] || continue
        curl -fsS "http://127.0.0.1:$p/metrics" >"$dir/controller-$(basename "$f" .log).prom" &&
            n=$((n + 1))
    done
    echo "$n"
}

ns e2e-mon
quota e2e-mon team '{gpu-memory: 24Gi, gpu-pods: 10}'
# A short demo, one scrape round a second: 4Gi pods every round and 8Gi ones
# every fourth (admitted while the quota has room, denied after), the oldest
# pod deleted every third round, a body that is no review every fifth.
# GQ_MONITORING_ROUNDS makes it longer (the picture in docs/ used 45).
rounds=${GQ_MONITORING_ROUNDS:-12}
oldest=1
# A Queue quota with one pod running and one queued behind it; the first is
# deleted in round 3, so the queue's length and wait are in the scrapes too.
ns e2e-monq
quota e2e-monq team '{gpu-memory: 4Gi}' 'whenExceeded: Queue'
q_seen() { gpu_pod probe 4Gi | kubectl -n e2e-monq create --dry-run=server -o json -f - 2>/dev/null |
    jq -e .spec.schedulingGates >/dev/null; }
eventually 30 q_seen || fail "the webhooks never saw the Queue quota of e2e-monq"
gpu_pod q1 4Gi | kubectl -n e2e-monq create -f - >/dev/null || fail "q1 was not admitted"
q1_counted() { [[ $(used e2e-monq team gpu-memory) == 4Gi ]]; }
eventually 30 q1_counted || fail "q1 was not counted in e2e-monq/team"
gpu_pod q2 4Gi | kubectl -n e2e-monq create -f - >/dev/null || fail "q2 was not created"
for ((i = 1; i <= rounds; i++)); do
    gpu_pod "p$i-4" 4Gi | kubectl -n e2e-mon create -f - >/dev/null 2>&1
    ((i % 4)) || gpu_pod "p$i-8" 8Gi | kubectl -n e2e-mon create -f - >/dev/null 2>&1
    if ((i % 3 == 0)); then
        for ((; oldest < i; oldest++)); do
            kubectl -n e2e-mon get pod "p$oldest-4" >/dev/null 2>&1 || continue
            kubectl -n e2e-mon delete pod "p$oldest-4" --wait=false >/dev/null 2>&1
            oldest=$((oldest + 1))
            break
        done
    fi
    ((i == 3)) && kubectl -n e2e-monq delete pod q1 --wait=false >/dev/null 2>&1
    ((i % 5)) || aux /mutate -o /dev/null -H 'Content-Type: application/json' -d '{"kind":"Pod"}'
    ((i % 5 - 1)) || aux /validate -o /dev/null -H 'Content-Type: application/json' -d 'not json'
    scrape "$(date +%s.%N)" >/dev/null
    sleep 1
done
# The controller's recount of what is left, then a final round.
left() {
    kubectl -n e2e-mon get pods -o json |
        jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name | capture("-(?<g>[0-9]+)$").g | tonumber] | add // 0'
}
recounted() {
    local u l
    u=$(used e2e-mon team gpu-memory)
    l=$(left)
    [[ $(kubectl -n e2e-mon get pods -o json | jq '[.items[] | select(.metadata.deletionTimestamp != null)] | length') == 0 &&
        ($u == "${l}Gi" || ($u == 0 && $l == 0)) ]]
}
eventually 30 recounted || fail "the controller did not recount e2e-mon/team: $(left)Gi left, used $(used e2e-mon team gpu-memory)"
q2_ungated() { [[ $(kubectl -n e2e-monq get pod q2 -o jsonpath='{.spec.schedulingGates}') == "" ]]; }
eventually 30 q2_ungated || fail "the controller did not ungate e2e-monq/q2 once q1 was gone"
final=$mon/$(date +%s.%N)
n=$(scrape "$(basename "$final")")
check "every webhook replica and controller answered /metrics" \
    "$(($(ls "$E2E"/webhook-*.port | wc -l) + 1 + $(ls "$E2E"/controller-*.log | wc -l)))" "$n"

out=$(python3 "$ROOT/test/monitoring_check.py" "$ROOT/deploy/monitoring/grafana-dashboard.json" \
    "$ROOT/deploy/monitoring/alerts.yaml" "$final"/*.prom 2>&1)
echo "$out"
check_match "every metric and label of the dashboard and the rules is exposed" "monitoring: ok" "$out"

# The checker is not vacuous: a misspelt metric, label or value fails it.
bad=$mon/bad-rules.yaml
sed 's/gpuquota_controller_leader)/gpuquota_controller_leading)/; s/decision="error"/decision="errors"/; s/by (instance, resource)/by (instance, kind)/' \
    "$ROOT/deploy/monitoring/alerts.yaml" >"$bad"
out=$(python3 "$ROOT/test/monitoring_check.py" "$ROOT/deploy/monitoring/grafana-dashboard.json" "$bad" \
    "$final"/*.prom 2>&1)
check_match "an unknown metric is caught" "metric gpuquota_controller_leading is not exposed" "$out"
check_match "an unknown label value is caught" "never has the value 'errors'" "$out"
check_match "an unknown grouping label is caught" "min by/without kind, a label its argument lacks" "$out"

# A deleted quota takes its gauges with it on the webhook replicas too (they
# set them while charging its pods), not only on the controller.
team_gauges() { # replicas that export a gpuquota_quota_used series of e2e-mon/team
    local f m n=0
    for f in "$E2E"/webhook-*.port; do
        # read whole before grep: grep -q stops at the first match, and under
        # pipefail the scrape then fails with "Failed writing body"
        m=$(wh_metrics "$f")
        grep -q '^gpuquota_quota_used{namespace="e2e-mon",quota="team",' <<<"$m" && n=$((n + 1))
    done
    echo "$n"
}
check_match "webhook replicas export the quota's gauges" '^[1-9]' "$(team_gauges)"
kubectl -n e2e-mon delete gpuquota team >/dev/null
no_team_gauges() { [[ $(team_gauges) == 0 ]]; }
if eventually 30 no_team_gauges; then
    pass "no webhook replica exports a gauge of the deleted quota"
else
    fail "webhook replicas still export gauges of the deleted quota: $(team_gauges)"
fi

# The samples draw the dashboard, with Debian's python3-matplotlib (make deps
# installs it): without it the check fails, never skips.
py=
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import matplotlib' 2>/dev/null; then py=$p; break; fi
done
if [[ -n $py ]]; then
    "$py" "$ROOT/scripts/dashboard_png.py" "$ROOT/deploy/monitoring/grafana-dashboard.json" "$mon" \
        "$mon/dashboard.png" >/dev/null
    check_match "the dashboard's panels render from the samples" "PNG image data" "$(file "$mon/dashboard.png")"
else
    fail "the dashboard's panels render from the samples: no python3 with matplotlib (make deps installs python3-matplotlib)"
fi
finish
