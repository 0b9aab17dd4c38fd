# Shared by the Helm chart's tests on a real control plane of their own
# (test/helm/install.sh, test/helm/certmanager.sh). Source it with dir (the
# test's state folder), GQ, ROOT and HERE set; it brings up the cluster,
# sources test/e2e/lib.sh and stops everything it started on exit.
#
# kwok runs no containers, so, as test/e2e/suite.sh does for deploy/, the
# two Deployments are left out by a post-renderer
# (test/helm/drop-deployments.sh) and the webhook and the controller run as
# local processes with their service accounts' tokens, behind the chart's
# Service through EndpointSlices (test/e2e/lib.sh); the local webhooks'
# certificate files follow Secret gpuquota-webhook-tls as the kubelet's
# secret volume does, and the webhook reloads them.
CHART=$ROOT/deploy/helm/gpuquota
REL=gpuquota

# stop_checked: stop the webhook and controller replicas as suite.sh down
# does and fail on any sanitizer report in their logs. Called before finish.
stop_checked() {
    local f
    for f in "$dir"/webhook-*.pid "$dir"/controller-*.pid; do
        [[ -f $f ]] && stop_pidfile "$f" TERM 150
    done
    "$ROOT/test/sanitizer_reports.sh" "$dir"/webhook-*.log "$dir"/controller-*.log ||
        failures=$((failures + 1))
}

helm_cleanup() {
    local f
    for f in "$dir"/webhook-*.pid "$dir"/controller-*.pid "$dir"/prober.pid "$dir"/cert-manager-*.pid; do
        [[ -f $f ]] && kill -TERM "$(cat "$f")" 2>/dev/null
    done
    "$ROOT/scripts/local-cluster.sh" down "$dir/cluster" >/dev/null 2>&1
    rm -rf "$dir"
}
[[ ! -e $dir ]] || helm_cleanup
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
trap 'rc=$?; [[ -n ${GQ_HELM_KEEP:-} ]] || helm_cleanup; exit $rc' EXIT
"$ROOT/scripts/local-cluster.sh" up "$dir/cluster" >/dev/null || exit 1
export GQ_E2E_DIR=$dir GQ ROOT
# shellcheck source=../e2e/lib.sh
source "$ROOT/test/e2e/lib.sh"
command -v helm >/dev/null || { echo "no helm in $BIN (scripts/k8s-bin.sh builds it)"; exit 1; }

secret_key() {
    kubectl -n "$NS_SYS" get secret "$1" -o json 2>/dev/null | jq -r --arg k "$2" '.data[$k] // empty' |
        base64 -d
}
# kubelet: the webhooks' certificate files follow Secret gpuquota-webhook-tls.
kubelet_sync() {
    mkdir -p "$dir/certs"
    secret_key gpuquota-webhook-tls tls.crt >"$dir/certs/tls.crt.new" &&
        secret_key gpuquota-webhook-tls tls.key >"$dir/certs/tls.key.new" &&
        secret_key gpuquota-webhook-tls ca.crt >"$dir/certs/ca.crt.new" || return 1
    mv "$dir/certs/tls.key.new" "$dir/certs/tls.key"
    mv "$dir/certs/tls.crt.new" "$dir/certs/tls.crt"
    mv "$dir/certs/ca.crt.new" "$dir/certs/ca.crt"
}
serving_serial() {
    openssl s_client -connect "127.0.0.1:$(cat "$dir/webhook-0.port")" \
        -servername "gpuquota-webhook.$NS_SYS.svc" </dev/null 2>/dev/null |
        openssl x509 -noout -serial 2>/dev/null
}
ca_bundle() {
    kubectl get "$1" gpuquota -o jsonpath='{range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}' | sort -u
}
# gpu_admission: a GPU pod server dry run in helm-probe, the webhooks decide.
gpu_admission() { gpu_pod "probe-$RANDOM" 1Gi | kubectl -n helm-probe create --dry-run=server -f - 2>&1; }
prober_start() {
    : >"$dir/prober.log"
    (while :; do
        out=$(gpu_admission) || echo "$(date +%T.%N) $out" >>"$dir/prober.log"
        echo . >>"$dir/prober.count"
    done) &
    echo $! >"$dir/prober.pid"
}
prober_stop() {
    kill "$(cat "$dir/prober.pid")" 2>/dev/null
    wait "$(cat "$dir/prober.pid")" 2>/dev/null
    rm -f "$dir/prober.pid"
    check "$1: no admission request failed during it ($(wc -l <"$dir/prober.count") requests)" "" \
        "$(head -3 "$dir/prober.log")"
    rm -f "$dir/prober.count"
}
used_is() { [[ $(used "$1" team gpu-memory) == "$2" ]]; }
serial_is_not() { [[ $(serving_serial) != "$1" ]]; }
# admits_and_enforces LABEL NS: a GPU pod is admitted and charged, one over the quota refused.
admits_and_enforces() {
    ns "$2"
    quota "$2" team '{gpu-memory: 20Gi}'
    check_match "$1: a GPU pod within the quota is admitted" "created" \
        "$(gpu_pod a 16Gi | kubectl -n "$2" create -f - 2>&1)"
    eventually 30 used_is "$2" 16Gi
    check "$1: it is charged" 16Gi "$(used "$2" team gpu-memory)"
    check_match "$1: a GPU pod over the quota is refused" \
        'admission webhook "validate.gpuquota.io" denied the request: exceeded quota: team' \
        "$(gpu_pod b 8Gi | kubectl -n "$2" create -f - 2>&1)"
}
config_from_release() {
    kubectl -n "$NS_SYS" get configmap gpuquota-config -o jsonpath='{.data.config\.yaml}' |
        python3 -c 'import sys, yaml; c = yaml.safe_load(sys.stdin); c["audit"] = {"path": sys.argv[1]}; print(yaml.safe_dump(c))' \
            "$dir/audit.log" >"$dir/config.yaml"
}
helm_op() { helm "$@" --no-hooks --post-renderer "$HERE/drop-deployments.sh" >>"$dir/helm.log" 2>&1; }
# cert_manager_crds: cert-manager's CRDs (test/helm/cert-manager-crds.sh)
# applied and established, so that kube-apiserver serves Issuers and Certificates.
cert_manager_crds() {
    local crds
    crds=$("$HERE/cert-manager-crds.sh" 2>>"$dir/helm.log") || {
        fail "cert-manager's CRDs could not be obtained from its Go module"
        return 1
    }
    kubectl apply --server-side -f "$crds" >/dev/null &&
        eventually 60 kubectl wait --for=condition=Established \
            crd/certificates.cert-manager.io crd/issuers.cert-manager.io crd/clusterissuers.cert-manager.io \
            crd/certificaterequests.cert-manager.io
}
