#!/usr/bin/env bash
# Only kube-apiserver can charge: the replicas run with --client-ca, and
# kube-apiserver presents its webhook client certificate (scripts/local-cluster.sh's
# AdmissionConfiguration). An AdmissionReview POSTed straight to /validate by
# anything else reaching the Service is refused, whatever it carries, and
# charges nothing; pods created through kube-apiserver are charged as usual.
source "$ROOT/test/e2e/lib.sh"
trap 'kubectl delete namespace e2e-mtls --wait=false >/dev/null 2>&1' EXIT
ns e2e-mtls
quota e2e-mtls team '{gpu-memory: 10Gi}'
port=$(cat "$E2E/webhook-0.port")
review() {
    jq -nc --arg uid "e2e-mtls-$RANDOM$RANDOM" '{apiVersion: "admission.k8s.io/v1",
        kind: "AdmissionReview", request: {uid: $uid,
        kind: {group: "", version: "v1", kind: "Pod"}, resource: {group: "", version: "v1", resource: "pods"},
        namespace: "e2e-mtls", name: "direct", operation: "CREATE", userInfo: {username: "intruder"},
        object: {apiVersion: "v1", kind: "Pod", metadata: {name: "direct", namespace: "e2e-mtls", uid: $uid},
            spec: {containers: [{name: "main", image: "x",
                resources: {limits: {"gpuquota.io/gpu-memory": "4Gi"}}}]}}}}'
}
# post [CURL-ARGS...]: the HTTP status of a direct POST to replica 0's /validate.
post() {
    review | curl -sS -o /dev/null -w '%{http_code}' --cacert "$E2E/certs/ca.crt" "$@" \
        --resolve "gpuquota-webhook.$NS_SYS.svc:$port:127.0.0.1" \
        -H 'Content-Type: application/json' --data-binary @- \
        "https://gpuquota-webhook.$NS_SYS.svc:$port/validate"
}
pki=$E2E/cluster/pki
check "no client certificate: refused" 403 "$(post)"
check "a certificate of the cluster CA with another name (the admin's): refused" 403 \
    "$(post --cert "$pki/admin.crt" --key "$pki/admin.key")"
check "a certificate from another CA: refused" 403 \
    "$(post --cert "$E2E/certs/tls.crt" --key "$E2E/certs/tls.key")"
check "nothing was charged by the refused reviews" 0 "$(reservations e2e-mtls team)"
check "kube-apiserver's certificate: answered" 200 \
    "$(post --cert "$pki/webhook-client.crt" --key "$pki/webhook-client.key")"
check_match "pods created through kube-apiserver are reviewed and charged" "created" \
    "$(gpu_pod p 4Gi | kubectl -n e2e-mtls create -f - 2>&1)"
check "/healthz needs no client certificate (kubelet probes)" 200 \
    "$(curl -sS -o /dev/null -w '%{http_code}' --cacert "$E2E/certs/ca.crt" \
        --resolve "gpuquota-webhook.$NS_SYS.svc:$port:127.0.0.1" \
        "https://gpuquota-webhook.$NS_SYS.svc:$port/healthz")"
finish
