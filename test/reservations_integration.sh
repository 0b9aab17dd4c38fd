#!/usr/bin/env bash
# Reservations end to end: the kube-apiserver stand-in calls a real
# `gpuquota webhook` (/mutate and /validate) for pods created with kubectl,
# and a real `gpuquota controller` folds the charges into status.used.
#   - the charge is keyed by the pod's metadata.uid as stored (the stand-in,
#     like kube-apiserver, assigns it before validating webhooks); a
#     gpuquota.io/reservation annotation written by the user plays no part;
#   - a pod that appears is counted once (used), never also as a reservation;
#   - a charge whose pod never appears (refused by a later webhook, or a
#     review posted straight to /validate) is dropped once the controller's
#     grace period has passed, long before the reservation TTL.
# Usage: reservations_integration.sh GPUQUOTA KUBE-STANDIN
set -uo pipefail
gq=$1
standin=$2
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/gq-reservations-it.XXXXXX)
host=wh.gq-system.svc
source "$root/test/integration_lib.sh"
source "$root/test/standin_lib.sh"
source "$root/test/cluster_lib.sh"

k apply -f "$root/deploy/crds/" >/dev/null || { echo "CRDs not applied"; exit 1; }
k create namespace team-r >/dev/null
k apply -f - >/dev/null <<'EOF'
apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: r, namespace: team-r}
spec: {hard: {gpu-memory: 10Gi}}
EOF

start_gq_webhook --reservation-ttl 1h

# /mutate and /validate, then a second validating configuration (later in
# name order) that refuses pods labelled refuse=yes: it runs after gpuquota
# has charged them, as a webhook that denies or ResourceQuota would.
register_gq_webhooks
webhook_config_yaml ValidatingWebhookConfiguration zz-refuse refuse.example.com \
    '{url: "https://127.0.0.1:1/refuse"}' CREATE 'objectSelector: {matchLabels: {refuse: "yes"}}' \
    'failurePolicy: Fail' 'sideEffects: None' | k apply -f - >/dev/null

pod() { gq_pod team-r "$@"; }
q() { curl -s "$S/apis/gpuquota.io/v1alpha1/namespaces/team-r/gpuquotas/r"; }
reservations() { q | jq -c '[.status.reservations[]? | {key, pod, "gpu-memory"}]'; }
used() { q | jq -r '.status.used."gpu-memory" // "-"'; }

# 1. The charge is keyed by the stored pod's uid; a forged annotation is
#    ignored, and /mutate no longer writes one.
A=$(pod a- 4Gi '  annotations: {gpuquota.io/reservation: forged}' | k create -f - | created)
check_match "pod a created" '^a-[a-z0-9]{5}$' "$A"
A_UID=$(k get pod "$A" -n team-r -o jsonpath='{.metadata.uid}')
check "reservation keyed by the stored pod's uid, under its generated name" \
    "[{\"key\":\"$A_UID\",\"pod\":\"$A\",\"gpu-memory\":\"4Gi\"}]" "$(reservations)"
check "the user's annotation is kept as written, nothing added" '{"gpuquota.io/reservation":"forged"}' \
    "$(k get pod "$A" -n team-r -o json | jq -c '.metadata.annotations | with_entries(select(.key == "gpuquota.io/reservation"))')"
# The controller starts now: it finds the pod by that uid.
start_gq_controller --reservation-grace 3s
eventually "pod a counted in used, its reservation dropped" 10 "4Gi []" \
    bash -c "echo \"\$(curl -s $S/apis/gpuquota.io/v1alpha1/namespaces/team-r/gpuquotas/r | jq -r '.status.used.\"gpu-memory\" // \"-\"') \$(curl -s $S/apis/gpuquota.io/v1alpha1/namespaces/team-r/gpuquotas/r | jq -c '[.status.reservations[]?.key]')\""

# 2. A pod refused by a later webhook leaves a charge behind (a phantom): it
#    holds quota until the controller drops it after the grace period.
#    The controller's grace period counts from when it first sees the
#    charge, which is after this create began: measure from here.
PH=$(now_ms)
OUT=$(pod b- 6Gi '  labels: {refuse: "yes"}' | k create -f -)
check_match "pod b refused after gpuquota charged it" 'failed calling webhook "refuse.example.com"' "$OUT"
check "no pod b stored" 0 "$(k get pods -n team-r -o name | grep -c '/b-')"
check_match "its charge is held" '^\[\{"key":"[0-9a-f-]{36}","pod":"b-[a-z0-9]{5}","gpu-memory":"6Gi"\}\]$' "$(reservations)"
check_match "while held, quota is taken" 'exceeded quota: r, requested: gpu-memory=1Gi, used: gpu-memory=10Gi, limited: gpu-memory=10Gi' \
    "$(pod c- 1Gi | k create -f -)"
eventually "the phantom is dropped after the grace period" 8 '[]' reservations
GONE=$(($(now_ms) - PH))
check "not before the grace period (${GONE} ms)" 1 "$((GONE >= 2500))"

# 3. A review posted straight to /validate (no pod will ever be stored).
REVIEW='{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"direct-1","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"team-r","operation":"CREATE","userInfo":{"username":"mallory"},"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"direct","namespace":"team-r","uid":"0d1e2c3b-direct"},"spec":{"containers":[{"name":"c","image":"x","resources":{"limits":{"gpuquota.io/gpu-memory":"2Gi"}}}]}}}}'
check_match "posted review charged" '"allowed":true' \
    "$(c -H 'Content-Type: application/json' --data-binary "$REVIEW" /validate)"
check "its charge is held" '[{"key":"0d1e2c3b-direct","pod":"direct","gpu-memory":"2Gi"}]' "$(reservations)"
eventually "the posted charge is dropped after the grace period" 8 '[]' reservations

# 4. Pod a is counted once: the quota has exactly 6Gi left.
check_match "6Gi fits exactly (a counted once)" '^c-[a-z0-9]{5}$' "$(pod c- 6Gi | k create -f - | created)"
check_match "then the quota is full" 'exceeded quota: r, requested: gpu-memory=1Gi, used: gpu-memory=10Gi, limited: gpu-memory=10Gi' \
    "$(pod d- 1Gi | k create -f -)"
eventually "used is the two pods" 5 "10Gi" used
check "abandoned reservations counted" 2 "$(metric gpuquota_controller_reservations_abandoned_total)"

# 5. A webhook replica's escrow hold and want (docs/validating-webhook.md,
#    Escrow) name no pod: they stay past the grace period, until they
#    expire (a hold dropped early would let its replica admit past hard); a
#    pod admitted on a hold whose pod never appeared goes like any phantom.
k apply -f - >/dev/null <<'EOF'
apiVersion: gpuquota.io/v1alpha1
kind: GPUQuota
metadata: {name: e, namespace: team-r}
spec: {hard: {gpu-memory: 10Gi}}
EOF
EXP=$(date -u -d '+10 min' +%Y-%m-%dT%H:%M:%SZ)
rec() { printf '{"key":"%s","namespace":"team-r","pod":"%s","gpu-memory":"%s","gpus":"0","gpu-pods":"%s","expires":"%s","escrow":"%s"}' "$@"; }
qe() { curl -s "$S/apis/gpuquota.io/v1alpha1/namespaces/team-r/gpuquotas/e"; }
qe | jq -c --argjson h "$(rec escrow-1 wh-0 4Gi 0 "$EXP" hold)" --argjson w "$(rec want-2 wh-1 0 0 "$EXP" want)" \
    --argjson a "$(rec 7e57-gone gone-x 1Gi 1 "$EXP" admitted)" '.status = {reservations: [$h, $w, $a]}' |
    curl -s -X PUT -H 'Content-Type: application/json' --data-binary @- \
        "$S/apis/gpuquota.io/v1alpha1/namespaces/team-r/gpuquotas/e/status" >/dev/null
escrow_keys() { qe | jq -c '[.status.reservations[]?.key]'; }
eventually "the pod admitted on a hold that never appeared is dropped" 10 '["escrow-1","want-2"]' escrow_keys
sleep 4 # past the 3 s grace, counted from when the controller first saw them
check "the hold and the want stay until they expire" '["escrow-1","want-2"]' "$(escrow_keys)"

stop_all webhook.log controller.log standin.err
finish
