#!/usr/bin/env bash
# Reinvocation through kube-apiserver: a second mutating webhook (a sidecar
# injector, test/e2e/tools/sidecar_webhook.py) changes the pod after gpuquota's
# /mutate, so kube-apiserver calls /mutate again (reinvocationPolicy:
# IfNeeded) with a new request uid. That second call must patch nothing:
# kube-apiserver's audit log records round 1 of mutate.gpuquota.io as
# "mutated": false, and the pod is charged once.
source "$ROOT/test/e2e/lib.sh"
work=$E2E/reinvocation
cleanup() {
    kubectl delete mutatingwebhookconfiguration zz-e2e-sidecar --ignore-not-found >/dev/null 2>&1
    kubectl -n "$NS_SYS" delete service e2e-sidecar --ignore-not-found >/dev/null 2>&1
    kubectl -n "$NS_SYS" delete endpointslice e2e-sidecar --ignore-not-found >/dev/null 2>&1
    [[ -f $E2E/aux-sidecar.pid ]] && kill "$(cat "$E2E/aux-sidecar.pid")" 2>/dev/null
    rm -f "$E2E/aux-sidecar.pid"
    kubectl delete namespace e2e-reinvoke --wait=false >/dev/null 2>&1
}
trap cleanup EXIT
mkdir -p "$work"
rm -f "$work/port"
"$GQ" certs generate --service e2e-sidecar --namespace "$NS_SYS" --out "$work/certs" >/dev/null
python3 "$ROOT/test/e2e/tools/sidecar_webhook.py" "$work/certs/tls.crt" "$work/certs/tls.key" \
    "$work/port" 2>"$work/sidecar.log" &
echo $! >"$E2E/aux-sidecar.pid"
eventually 10 test -s "$work/port" || { fail "the sidecar webhook did not start"; finish; }
port=$(cat "$work/port")
ns e2e-reinvoke e2e-sidecar=true
quota e2e-reinvoke team '{gpu-memory: 20Gi}'

kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: e2e-sidecar, namespace: $NS_SYS}
spec:
  ports: [{name: https, port: 443, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: e2e-sidecar
  namespace: $NS_SYS
  labels: {kubernetes.io/service-name: e2e-sidecar, endpointslice.kubernetes.io/managed-by: e2e.gpuquota.io}
addressType: FQDN
endpoints: [{addresses: ["127.0.0.1"], conditions: {ready: true}}]
ports: [{name: https, port: $port, protocol: TCP}]
---
# Named after gpuquota's, so it runs after it in each round.
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: zz-e2e-sidecar}
webhooks:
  - name: sidecar.e2e.gpuquota.io
    admissionReviewVersions: [v1]
    clientConfig:
      service: {name: e2e-sidecar, namespace: $NS_SYS, path: /mutate, port: 443}
      caBundle: $(base64 -w0 "$work/certs/ca.crt")
    rules:
      - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods], scope: Namespaced}
    failurePolicy: Fail
    sideEffects: None
    reinvocationPolicy: Never
    namespaceSelector: {matchLabels: {e2e-sidecar: "true"}}
EOF

# The webhook configuration reaches kube-apiserver's informer shortly after
# it is written: poll with dry runs until the sidecar shows up.
has_sidecar() {
    gpu_pod probe 1Gi | kubectl -n e2e-reinvoke create --dry-run=server -o json -f - |
        jq -e '[.spec.containers[].name] | index("log-shipper")'
}
eventually 30 has_sidecar || fail "the sidecar webhook was never called"

for name in trainer-0 trainer-1; do
    out=$(gpu_pod "$name" 4Gi | kubectl -n e2e-reinvoke create -f - 2>&1)
    check_match "$name is created" "pod/$name created" "$out"
done
pod=$(kubectl -n e2e-reinvoke get pod trainer-0 -o json)
check "the sidecar was added" '["main","log-shipper"]' "$(jq -c '[.spec.containers[].name]' <<<"$pod")"
check "gpuquota's rewrite survived" '{"aliyun.com/gpu-mem":"4"}' \
    "$(jq -c '.spec.containers[0].resources.limits' <<<"$pod")"

# kube-apiserver's own record of each mutating call of the create.
rounds() {
    jq -c --arg name "$1" 'select(.objectRef.resource == "pods" and .verb == "create"
            and .objectRef.namespace == "e2e-reinvoke" and .objectRef.name == $name
            and .stage == "ResponseComplete")
        | .annotations | to_entries
        | map(select(.key | startswith("mutation.webhook.admission.k8s.io/")))
        | map({key: (.key | ltrimstr("mutation.webhook.admission.k8s.io/")),
               value: (.value | fromjson | "\(.webhook)=\(.mutated)")}) | from_entries' \
        "$E2E/cluster/audit.log"
}
for name in trainer-0 trainer-1; do
    check "$name: gpuquota mutated in round 0, the sidecar after it, gpuquota reinvoked without a patch" \
        '{"round_0_index_0":"mutate.gpuquota.io=true","round_0_index_1":"sidecar.e2e.gpuquota.io=true","round_1_index_0":"mutate.gpuquota.io=false"}' \
        "$(rounds "$name" | tail -1)"
done
check "gpuquota reviewed each create twice (with two request uids)" 4 \
    "$(jq -r 'select(.webhook == "mutate" and .namespace == "e2e-reinvoke" and (.dryRun | not)) | .uid' \
        "$E2E/audit.log" | sort -u | wc -l)"
check "each pod is charged once" 8Gi \
    "$(eventually 15 bash -c "[[ \$(kubectl -n e2e-reinvoke get gq team -o jsonpath='{.status.used.gpu-memory}') == 8Gi ]]"
       kubectl -n e2e-reinvoke get gq team -o jsonpath='{.status.used.gpu-memory}')"
finish
