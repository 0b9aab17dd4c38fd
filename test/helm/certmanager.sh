#!/usr/bin/env bash
# The chart's cert-manager mode with real cert-manager, on a real control
# plane of its own (scripts/local-cluster.sh): cert-manager's CRDs applied,
# its controller and CA injector (built from its Go module by
# scripts/k8s-bin.sh, test/k8s-tools/cert-manager) running as local processes
# with a kubeconfig, then `helm install --set certificates.mode=cert-manager`.
#
# Checked: the chart's CA and serving Certificates become Ready; the Secret
# the webhook mounts holds a certificate for the Service's names signed by
# the chart's CA; the CA injector writes that CA into both webhook
# configurations' caBundle; the webhooks, started with the Secret's files,
# rewrite and charge a GPU pod created with kubectl; a renewal (what
# `cmctl renew` does: the Issuing condition set on the Certificate) gives a
# new serving certificate of the same CA, which the webhook serves while a
# prober's admissions never fail; `helm uninstall` leaves nothing behind.
#
# cert-manager's controller runs with --enable-certificate-owner-ref (its
# Helm value enableCertificateOwnerRef), so that the garbage collector
# removes the Secrets with their Certificates (docs/install.md).
#
# Usage: certmanager.sh STATE-DIR GPUQUOTA
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:?usage: certmanager.sh STATE-DIR GPUQUOTA}
GQ=$(cd "$(dirname "${2:?the gpuquota binary}")" && pwd)/$(basename "$2")
HERE=$ROOT/test/helm
# shellcheck source=lib.sh
source "$HERE/lib.sh"
NS_SYS=gpuquota-cm
for c in controller cainjector; do
    command -v "cert-manager-$c" >/dev/null || {
        echo "no cert-manager-$c in $BIN (scripts/k8s-bin.sh builds it with Go 1.26 or later)"
        exit 1
    }
done

# cm_start NAME ARGS...: cert-manager-NAME as a local process, as its
# Deployment would run it, with the admin's kubeconfig.
cm_start() {
    "cert-manager-$1" --kubeconfig "$KUBECONFIG" "${@:2}" >>"$dir/cert-manager-$1.log" 2>&1 &
    echo $! >"$dir/cert-manager-$1.pid"
}
cert_ready() {
    [[ $(kubectl -n "$NS_SYS" get certificate "$1" \
        -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}
# tls_serial: the serial of the serving certificate in the Secret.
tls_serial() { secret_key gpuquota-webhook-tls tls.crt | openssl x509 -noout -serial 2>/dev/null; }
tls_serial_is_not() { [[ -n $(tls_serial) && $(tls_serial) != "$1" ]]; }
bundle_is() { [[ $(ca_bundle "$1") == "$2" ]]; }
show_logs() {
    local f
    for f in "$dir"/cert-manager-*.log; do
        echo "--- $(basename "$f") (last lines)"
        tail -15 "$f"
    done
}

cert_manager_crds || exit 1
kubectl create namespace "$NS_SYS" >/dev/null
cm_start controller --cluster-resource-namespace "$NS_SYS" --enable-certificate-owner-ref
cm_start cainjector

# ------------------------------------------------------------------ install
# The order of docs/install.md (Helm, cert-manager mode).
cm=(--set certificates.mode=cert-manager)
helm_op install "$REL" "$CHART" -n "$NS_SYS" "${cm[@]}" || { cat "$dir/helm.log"; exit 1; }
if ! eventually 120 cert_ready gpuquota-webhook; then
    fail "the serving Certificate became Ready within 120 s"
    kubectl -n "$NS_SYS" get certificates,certificaterequests,issuers -o wide
    show_logs
    finish
fi
pass "the serving Certificate becomes Ready"
check "the chart's CA Certificate is Ready" yes "$(cert_ready gpuquota-ca && echo yes)"
check "both Issuers are Ready" "True True" \
    "$(kubectl -n "$NS_SYS" get issuer gpuquota-selfsigned gpuquota-ca \
        -o jsonpath='{.items[*].status.conditions[?(@.type=="Ready")].status}')"
secret_key gpuquota-webhook-tls tls.crt >"$dir/tls.crt"
secret_key gpuquota-webhook-ca ca.crt >"$dir/issuing-ca.crt"
check "the Secret's certificate names the Service" \
    "DNS:gpuquota-webhook.$NS_SYS.svc, DNS:gpuquota-webhook.$NS_SYS.svc.cluster.local" \
    "$(openssl x509 -in "$dir/tls.crt" -noout -ext subjectAltName | sed -n 2p | tr -d ' ' | sed 's/,/, /g')"
check "it is a serving certificate" "TLS Web Server Authentication" \
    "$(openssl x509 -in "$dir/tls.crt" -noout -ext extendedKeyUsage | sed -n 2p | sed 's/^ *//')"
check "it is signed by the chart's CA" "$dir/tls.crt: OK" \
    "$(openssl verify -CAfile "$dir/issuing-ca.crt" "$dir/tls.crt" 2>&1)"
check "the Secret's ca.crt is that CA" "$(cat "$dir/issuing-ca.crt")" "$(secret_key gpuquota-webhook-tls ca.crt)"
bundle=$(base64 -w0 <"$dir/issuing-ca.crt")
eventually 60 bundle_is validatingwebhookconfiguration "$bundle"
eventually 60 bundle_is mutatingwebhookconfiguration "$bundle"
check "the CA injector put the issuing CA into the mutating webhook's caBundle" "$bundle" \
    "$(ca_bundle mutatingwebhookconfiguration)"
check "and into every validating webhook's" "$bundle" "$(ca_bundle validatingwebhookconfiguration)"
check "the release is deployed" deployed "$(helm status "$REL" -n "$NS_SYS" -o json | jq -r .info.status)"

kubelet_sync || exit 1
config_from_release
webhooks 2 || exit 1
controller_start 0
admits_and_enforces install cm-a
check "the GPU pod was rewritten by the mutating webhook and charged" "gpu-memory=16Gi,gpus=0,gpu-pods=1 true" \
    "$(kubectl -n cm-a get pod a -o json |
        jq -r '.metadata.annotations["gpuquota.io/charged"] + " " + .metadata.labels["gpuquota.io/managed"]')"

# ------------------------------------------------------------------ renewal
# What `cmctl renew` does: the Issuing condition, reason ManuallyTriggered.
ns helm-probe
quota helm-probe team '{gpu-memory: 1000Gi}'
serial0=$(serving_serial)
tls0=$(tls_serial)
cp "$dir/tls.crt" "$dir/tls-0.crt"
check "the webhook serves the Secret's certificate" "$tls0" "$serial0"
prober_start
kubectl -n "$NS_SYS" patch certificate gpuquota-webhook --subresource=status --type=json -p "[{\"op\": \"add\",
    \"path\": \"/status/conditions/-\", \"value\": {\"type\": \"Issuing\", \"status\": \"True\",
    \"reason\": \"ManuallyTriggered\", \"message\": \"renewal requested by the test\",
    \"lastTransitionTime\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"}}]" >/dev/null
if ! eventually 120 tls_serial_is_not "$tls0"; then
    fail "cert-manager renewed the serving certificate within 120 s"
    show_logs
fi
eventually 60 cert_ready gpuquota-webhook
kubelet_sync
eventually 30 serial_is_not "$serial0"
# And the prober keeps going until 10 more admissions went to the renewed certificate.
probes() { wc -l <"$dir/prober.count" 2>/dev/null || echo 0; }
probes_beyond() { (($(probes) >= $1)); }
eventually 120 probes_beyond $(($(probes) + 10))
prober_stop "renewal"
check "renewal: the webhook serves the renewed certificate" "$(tls_serial)" "$(serving_serial)"
check "renewal: it is a new certificate" changed "$([[ -n $serial0 && $(serving_serial) != "$serial0" ]] && echo changed)"
check "renewal: signed by the same CA" "$dir/tls.crt: OK" \
    "$(secret_key gpuquota-webhook-tls tls.crt >"$dir/tls.crt" && openssl verify -CAfile "$dir/issuing-ca.crt" "$dir/tls.crt" 2>&1)"
check "renewal: with a new private key (rotationPolicy Always)" new \
    "$([[ $(openssl x509 -in "$dir/tls.crt" -noout -pubkey) != $(openssl x509 -in "$dir/tls-0.crt" -noout -pubkey 2>/dev/null) ]] && echo new)"
check "renewal: the caBundle is unchanged" "$bundle" "$(ca_bundle validatingwebhookconfiguration)"
check "renewal: the Certificate's revision is 2" 2 \
    "$(kubectl -n "$NS_SYS" get certificate gpuquota-webhook -o jsonpath='{.status.revision}')"
admits_and_enforces renewal cm-b

# ---------------------------------------------------------------- uninstall
helm uninstall "$REL" -n "$NS_SYS" >>"$dir/helm.log" 2>&1 || { cat "$dir/helm.log"; exit 1; }
webhooks 0
controller_stop 0
left() {
    kubectl -n "$NS_SYS" get certificates,certificaterequests,issuers,secrets,configmaps,serviceaccounts,services,roles,rolebindings -o name |
        grep -v -e '^configmap/kube-root-ca.crt$' -e '^serviceaccount/default$'
}
nothing_left() { [[ -z $(left) ]]; }
# The Secrets go with their Certificates through the garbage collector.
eventually 60 nothing_left
check "uninstall: nothing of the release is left in its namespace" "" "$(left)"
check "uninstall: no webhook configuration is left" "" \
    "$(kubectl get mutatingwebhookconfigurations,validatingwebhookconfigurations -o name | grep gpuquota)"
check "uninstall: no cluster role or binding is left" "" \
    "$(kubectl get clusterroles,clusterrolebindings -o name | grep gpuquota)"
check "uninstall: a GPU pod is no longer sent anywhere" created \
    "$(gpu_pod z 1Gi | kubectl -n cm-a create -f - 2>&1 | grep -o created)"
stop_checked
finish
