#!/usr/bin/env bash
# The Helm chart on a real control plane of its own (scripts/local-cluster.sh,
# not the e2e suite's): helm install, two upgrades (a serving certificate
# renewal, then a CA rotation), helm uninstall, and Helm taking over an
# install made with deploy/ (cert-manager mode: test/helm/certmanager.sh).
#
# kwok runs no containers, so, as test/e2e/suite.sh does for deploy/:
#   - the two Deployments are left out by a post-renderer
#     (test/helm/drop-deployments.sh) and the webhook and the controller run
#     as local processes with their service accounts' tokens, behind the
#     chart's Service through EndpointSlices (test/e2e/lib.sh);
#   - helm runs with --no-hooks and this test runs the chart's hooks itself,
#     in helm's order (test/helm/hooks.py): the hook RBAC objects are applied,
#     and each hook Job's containers' commands (the chart's own script) run
#     here as the Job's service account, with the Secrets the Job mounts;
#   - the local webhooks' certificate files follow the Secret as the
#     kubelet's secret volume does, and the webhook reloads them.
# A GPU pod is admitted and a quota enforced after install and after each
# upgrade; a prober makes admission requests throughout both upgrades and
# none may fail; after uninstall nothing of the release is left but the CRDs.
#
# Usage: install.sh STATE-DIR GPUQUOTA
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:?usage: install.sh STATE-DIR GPUQUOTA}
GQ=$(cd "$(dirname "${2:?the gpuquota binary}")" && pwd)/$(basename "$2")
HERE=$ROOT/test/helm
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# A release name and namespace other than deploy/'s, so that every place
# the chart puts them is exercised: the webhook trusts, and the controller
# elects its leader in, the namespace the pods run in (POD_NAMESPACE, as the
# Deployments' downward API sets it; test/e2e/lib.sh).
NS_SYS=gpuquota-helm
REL=gq-prod

# kubectl_as SA ARGS...: kubectl with a token of service account SA.
kubectl_as() {
    [[ -f $dir/sa-$1.kubeconfig ]] || sa_kubeconfig "$1" "$dir/sa-$1.kubeconfig" || return 1
    KUBECONFIG=$dir/sa-$1.kubeconfig kubectl "${@:2}"
}

# run_hooks RENDERED PHASE: what helm does for the hooks of PHASE.
run_hooks() {
    local plan=$dir/hooks-$2.json n i kind name sa work c cmd env
    python3 "$HERE/hooks.py" "$1" "$2" >"$plan" || return 1
    n=$(jq length "$plan")
    for ((i = 0; i < n; i++)); do
        kind=$(jq -r ".[$i].kind" "$plan")
        name=$(jq -r ".[$i].name" "$plan")
        if [[ $kind != Job ]]; then
            jq ".[$i].doc" "$plan" | kubectl apply -f - >/dev/null || return 1
            continue
        fi
        # The Job itself is one kube-apiserver accepts.
        jq ".[$i].doc" "$plan" | kubectl apply --dry-run=server -f - >/dev/null || return 1
        sa=$(jq -r ".[$i].sa" "$plan")
        rm -f "$dir/sa-$sa.kubeconfig"
        work=$dir/job-$name/work
        rm -rf "$dir/job-$name"
        mkdir -p "$work"
        for c in $(jq -r ".[$i].init + .[$i].containers | keys[]" "$plan"); do
            mapfile -d '' -t cmd < <(jq -j \
                ".[$i].init + .[$i].containers | .[$c].command[] + \"\\u0000\"" "$plan")
            mapfile -d '' -t env < <(jq -j \
                ".[$i].init + .[$i].containers | .[$c].env | to_entries[] | \"\(.key)=\(.value)\\u0000\"" "$plan")
            # The image's entrypoint is gpuquota: its arguments run here as
            # the Job's service account, the emptyDir being $work.
            cmd=("${cmd[@]/#--work=\/scratch/--work=$work}")
            cmd=(env "${env[@]}" "$GQ" "${cmd[@]}" --kubeconfig "$dir/sa-$sa.kubeconfig")
            [[ -f $dir/sa-$sa.kubeconfig ]] || sa_kubeconfig "$sa" "$dir/sa-$sa.kubeconfig"
            if ! "${cmd[@]}" >>"$dir/hooks.log" 2>&1; then
                echo "hook $2 job/$name failed:" >&2
                tail -5 "$dir/hooks.log" >&2
                return 1
            fi
        done
    done
    for ((i = n - 1; i >= 0; i--)); do
        [[ $(jq -r ".[$i].deleteOnSuccess" "$plan") == true ]] || continue
        [[ $(jq -r ".[$i].kind" "$plan") == Job ]] && continue
        jq ".[$i].doc" "$plan" | kubectl delete --ignore-not-found -f - >/dev/null
    done
}

# render ARGS...: the manifests helm would send, lookups answered by the cluster.
render() {
    helm template "$REL" "$CHART" -n "$NS_SYS" --dry-run=server "$@" >"$dir/rendered.yaml"
}

# ------------------------------------------------------------------ install
# The order of docs/install.md (Helm, self-managed certificates).
kubectl create namespace "$NS_SYS" >/dev/null
render
run_hooks "$dir/rendered.yaml" pre-install || exit 1
check "pre-install: the serving Secret exists before the release" kubernetes.io/tls \
    "$(kubectl -n "$NS_SYS" get secret gpuquota-webhook-tls -o jsonpath='{.type}')"
helm_op install "$REL" "$CHART" -n "$NS_SYS" || { cat "$dir/helm.log"; exit 1; }
run_hooks "$dir/rendered.yaml" post-install || exit 1
bundle=$(secret_key gpuquota-webhook-ca bundle.crt | base64 -w0)
check "post-install: the mutating webhook trusts the chart's CA" "$bundle" \
    "$(ca_bundle mutatingwebhookconfiguration)"
check "post-install: every validating webhook trusts it" "$bundle" \
    "$(ca_bundle validatingwebhookconfiguration)"
check "the exempt namespaces name the release namespace" "kube-system $NS_SYS" \
    "$(kubectl -n "$NS_SYS" get configmap gpuquota-config -o jsonpath='{.data.config\.yaml}' |
        python3 -c 'import sys, yaml; print(*yaml.safe_load(sys.stdin)["exemptNamespaces"])')"
check "the release is deployed" deployed "$(helm status "$REL" -n "$NS_SYS" -o json | jq -r .info.status)"
# prometheus-operator's ServiceMonitor and PodMonitor of the chart, checked by
# kube-apiserver against prometheus-operator's own CRDs (server-side dry run).
pcrds=$("$HERE/prometheus-operator-crds.sh" 2>>"$dir/helm.log") || { echo "no prometheus-operator CRDs" >&2; exit 1; }
kubectl apply --server-side -f "$pcrds/monitoring.coreos.com_servicemonitors.yaml" \
    -f "$pcrds/monitoring.coreos.com_podmonitors.yaml" \
    -f "$pcrds/monitoring.coreos.com_prometheusrules.yaml" >>"$dir/helm.log" 2>&1 &&
    kubectl wait --for=condition=Established --timeout=60s crd/servicemonitors.monitoring.coreos.com \
        crd/podmonitors.monitoring.coreos.com crd/prometheusrules.monitoring.coreos.com \
        >>"$dir/helm.log" 2>&1 || { echo "CRDs not established" >&2; exit 1; }
check "monitoring: the alerting rules go to whichever namespace they are applied in" \
    "$NS_SYS/gpuquota" \
    "$(kubectl apply -n "$NS_SYS" --dry-run=server -f "$ROOT/deploy/monitoring/alerts.yaml" -o json |
        jq -r '.metadata.namespace + "/" + .metadata.name')"
helm template "$REL" "$CHART" -n "$NS_SYS" --set monitoring.serviceMonitor.enabled=true \
    --set monitoring.podMonitor.enabled=true --show-only templates/monitoring.yaml >"$dir/monitors.yaml"
check "monitoring: the ServiceMonitors and PodMonitors pass prometheus-operator's schemas" \
    "podmonitor.monitoring.coreos.com/gpuquota-controller created (server dry run)
podmonitor.monitoring.coreos.com/gpuquota-webhook created (server dry run)
servicemonitor.monitoring.coreos.com/gpuquota-controller created (server dry run)
servicemonitor.monitoring.coreos.com/gpuquota-webhook created (server dry run)" \
    "$(kubectl apply --dry-run=server -f "$dir/monitors.yaml" 2>&1 | sort)"
check "monitoring: the ServiceMonitors select the two Services" \
    "gpuquota-controller-metrics gpuquota-webhook" \
    "$(kubectl -n "$NS_SYS" get svc -l app.kubernetes.io/name=gpuquota -o name | sed 's|service/||' | sort | xargs)"
kubelet_sync || exit 1
config_from_release
webhooks 2 || exit 1
controller_start 0
admits_and_enforces install helm-a
lease_holder() { kubectl -n "$NS_SYS" get lease gpuquota-controller -o jsonpath='{.spec.holderIdentity}'; }
has_holder() { [[ -n $(lease_holder) ]]; }
eventually 30 has_holder
check_match "install: the controller leads on the Lease of the release namespace" '.' "$(lease_holder)"
check "install: no Lease anywhere else" "$NS_SYS/gpuquota-controller" \
    "$(kubectl get leases -A --field-selector metadata.name=gpuquota-controller \
        -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}')"
# Queueing: the controller (its account in the release namespace, which the
# webhook trusts) charges a queued pod and removes its gate.
ns helm-queue
quota helm-queue team '{gpu-memory: 8Gi}' 'whenExceeded: Queue'
queue_gates() { kubectl -n helm-queue get pod "$1" -o json | jq -r '[.spec.schedulingGates[]?.name] | join(",")'; }
queue_open() { [[ -z $(queue_gates "$1") ]]; }
queue_seen() { gpu_pod probe 8Gi | kubectl -n helm-queue create --dry-run=server -o json -f - | jq -e '.spec.schedulingGates'; }
eventually 15 queue_seen
check_match "install: a pod of a Queue quota is created" created "$(gpu_pod q1 8Gi | kubectl -n helm-queue create -f - 2>&1)"
check_match "install: a second one waits behind the gate" created "$(gpu_pod q2 8Gi | kubectl -n helm-queue create -f - 2>&1)"
eventually 30 queue_open q1
check "install: the controller ungates the pod that fits" "" "$(queue_gates q1)"
check "install: and keeps the other gated" gpuquota.io/quota "$(queue_gates q2)"
kubectl -n helm-queue delete pod q1 --grace-period=0 --force >/dev/null 2>&1
eventually 30 queue_open q2
check "install: once it is gone the next one starts" "" "$(queue_gates q2)"
# kubectl gpuquota explain reads the configuration from the release
# namespace, named by --gpuquota-namespace or $GPUQUOTA_NAMESPACE.
gpu_pod e 8Gi >"$dir/explain-pod.yaml"
check_match "explain --gpuquota-namespace finds the release's configuration" \
    "Config: +configmap $NS_SYS/gpuquota-config" \
    "$("$GQ" explain -f "$dir/explain-pod.yaml" -n helm-a --gpuquota-namespace "$NS_SYS" 2>&1)"
check_match "explain with GPUQUOTA_NAMESPACE finds it too" "Config: +configmap $NS_SYS/gpuquota-config" \
    "$(GPUQUOTA_NAMESPACE=$NS_SYS "$GQ" explain -f "$dir/explain-pod.yaml" -n helm-a 2>&1)"
check_match "explain without either says the default namespace holds none" \
    "Config: +embedded default \(configmap gpuquota-system/gpuquota-config: " \
    "$("$GQ" explain -f "$dir/explain-pod.yaml" -n helm-a 2>&1)"
check "gpuquota queue with GPUQUOTA_NAMESPACE prices with the release's configuration" "" \
    "$(GPUQUOTA_NAMESPACE=$NS_SYS "$GQ" queue 2>&1 >/dev/null)"
check_match "gpuquota queue without it says the default namespace holds none" \
    "pricing with the embedded default \(configmap gpuquota-system/gpuquota-config: " \
    "$("$GQ" queue 2>&1 >/dev/null)"
check_match "a GPUQUOTA_NAMESPACE that is no namespace name is refused" \
    "GPUQUOTA_NAMESPACE \"Bad_NS\" is not a valid namespace name" \
    "$(GPUQUOTA_NAMESPACE=Bad_NS "$GQ" explain -f "$dir/explain-pod.yaml" -n helm-a 2>&1)"
# The prober's namespace has room for every dry run (requireQuota comes on).
ns helm-probe
quota helm-probe team '{gpu-memory: 1000Gi}'

# ------------------------------------------- upgrade 1: serving pair renewed
# renewBeforeDays beyond the installed certificate's remaining life (365
# days): the pre-upgrade hook renews the serving pair, for 500 days (the CA
# stays); requireQuota is turned on.
serial0=$(serving_serial)
ca0=$(secret_key gpuquota-webhook-ca ca.crt)
prober_start
up1=(--set certificates.selfManaged.renewBeforeDays=400 --set certificates.selfManaged.days=500
    --set config.requireQuota=true)
render "${up1[@]}" --is-upgrade
run_hooks "$dir/rendered.yaml" pre-upgrade || exit 1
kubelet_sync
helm_op upgrade "$REL" "$CHART" -n "$NS_SYS" "${up1[@]}" || { cat "$dir/helm.log"; exit 1; }
run_hooks "$dir/rendered.yaml" post-upgrade || exit 1
eventually 30 serial_is_not "$serial0"
prober_stop "upgrade 1"
check "upgrade 1: the webhook serves the renewed certificate" changed \
    "$([[ -n $serial0 && $(serving_serial) != "$serial0" ]] && echo changed)"
check "upgrade 1: the CA is kept" "$ca0" "$(secret_key gpuquota-webhook-ca ca.crt)"
check "upgrade 1: the caBundle is unchanged" "$bundle" "$(ca_bundle validatingwebhookconfiguration)"
check "upgrade 1: the ConfigMap carries the new value" true \
    "$(kubectl -n "$NS_SYS" get configmap gpuquota-config -o jsonpath='{.data.config\.yaml}' |
        python3 -c 'import sys, yaml; print(str(yaml.safe_load(sys.stdin)["requireQuota"]).lower())')"
config_from_release
webhooks 2 || exit 1
admits_and_enforces "upgrade 1" helm-b
ns helm-noquota
check_match "upgrade 1: requireQuota refuses a GPU pod where no quota is" \
    'denied the request: insufficient quota to consume: gpu-memory,gpu-pods' \
    "$(gpu_pod a 1Gi | kubectl -n helm-noquota create -f - 2>&1)"

# ------------------------------------------------ upgrade 2: a new CA
# A serving certificate longer than the CA's remaining life: certs generate
# makes a new CA. The bundle keeps the old one until the new pair is served.
serial1=$(serving_serial)
prober_start
up2=(--set certificates.selfManaged.renewBeforeDays=3699 --set certificates.selfManaged.days=3700
    --set certificates.selfManaged.caDays=7300 --set config.requireQuota=true)
render "${up2[@]}" --is-upgrade
run_hooks "$dir/rendered.yaml" pre-upgrade || exit 1
ca1=$(secret_key gpuquota-webhook-ca ca.crt)
check "upgrade 2: a new CA" new "$([[ $ca1 != "$ca0" ]] && echo new)"
check "upgrade 2: the bundle holds the new and the old CA" 2 \
    "$(ca_bundle validatingwebhookconfiguration | base64 -d | grep -c 'BEGIN CERTIFICATE')"
kubelet_sync
helm_op upgrade "$REL" "$CHART" -n "$NS_SYS" "${up2[@]}" || { cat "$dir/helm.log"; exit 1; }
run_hooks "$dir/rendered.yaml" post-upgrade || exit 1
eventually 30 serial_is_not "$serial1"
prober_stop "upgrade 2"
check "upgrade 2: the bundle still holds both after helm's upgrade and the post-upgrade hook" 2 \
    "$(ca_bundle mutatingwebhookconfiguration | base64 -d | grep -c 'BEGIN CERTIFICATE')"
admits_and_enforces "upgrade 2" helm-c
check "the release is at revision 3" 3 "$(helm status "$REL" -n "$NS_SYS" -o json | jq -r .version)"

# ---------------------------------------------------------------- uninstall
render
helm uninstall "$REL" -n "$NS_SYS" --no-hooks >>"$dir/helm.log" 2>&1 || { cat "$dir/helm.log"; exit 1; }
run_hooks "$dir/rendered.yaml" post-delete || exit 1
webhooks 0
controller_stop 0
check "uninstall: no webhook configuration is left" "" \
    "$(kubectl get mutatingwebhookconfigurations,validatingwebhookconfigurations -o name | grep gpuquota)"
check "uninstall: no cluster role or binding is left" "" \
    "$(kubectl get clusterroles,clusterrolebindings -o name | grep gpuquota)"
check "uninstall: nothing of gpuquota is left in its namespace" "" \
    "$(kubectl -n "$NS_SYS" get all,configmaps,secrets,serviceaccounts,roles,rolebindings,poddisruptionbudgets,networkpolicies,cronjobs,jobs,leases -o name |
        grep -v -e '^configmap/kube-root-ca.crt$' -e '^serviceaccount/default$' \
            -e '^lease.coordination.k8s.io/gpuquota-controller$')"
check "uninstall: the CRDs stay (helm keeps crds/)" 3 "$(kubectl get crd -o name | grep -c gpuquota.io)"
check "uninstall: the quotas with them" team "$(kubectl -n helm-a get gpuquota team -o jsonpath='{.metadata.name}')"
check "uninstall: a GPU pod is no longer sent anywhere" created \
    "$(gpu_pod z 1Gi | kubectl -n helm-noquota create -f - 2>&1 | grep -o created)"

# cert-manager mode, with cert-manager's controller and CA injector running:
# test/helm/certmanager.sh (ctest helm_certmanager).

# Every values example is accepted by kube-apiserver (server dry run); the
# cert-manager ones need its CRDs.
cert_manager_crds || exit 1
kubectl apply --server-side -f "$CHART/crds" >/dev/null
for ex in "$CHART"/examples/*.yaml; do
    out=$(helm template "$REL" "$CHART" -n "$NS_SYS" -f "$ex" --dry-run=server |
        kubectl apply --dry-run=server -f - 2>&1)
    rc=$?
    check "example $(basename "$ex"): kube-apiserver accepts every object" 0 "$rc"
    ((rc == 0)) || echo "$out" | tail -5
done

# ------------------------------------------- taking over a kustomize install
# docs/upgrade.md: an install made from deploy/ (manual certificates, as
# docs/install.md's kustomize steps) is labelled for Helm and installed
# over. The pre-install hook finds the live caBundle, keeps that CA in the
# bundle and injects it before the new pair is served: nothing is refused.
NS_SYS=gpuquota-system
rm -f "$dir"/webhook.kubeconfig "$dir"/controller.kubeconfig "$dir"/sa-*.kubeconfig
"$GQ" certs generate --service gpuquota-webhook --namespace "$NS_SYS" --out "$dir/kcerts" >/dev/null
kubectl apply -k "$ROOT/test/e2e/overlay" 2>"$dir/apply.err" >/dev/null ||
    { cat "$dir/apply.err"; exit 1; } # (it warns that the CRDs were created by helm)
kubectl -n "$NS_SYS" create secret tls gpuquota-webhook-tls \
    --cert "$dir/kcerts/tls.crt" --key "$dir/kcerts/tls.key" >/dev/null
kubelet_sync_from() { cp "$1/tls.key" "$dir/certs/tls.key" && cp "$1/tls.crt" "$dir/certs/tls.crt"; }
kubelet_sync_from "$dir/kcerts"
cp "$dir/kcerts/ca.crt" "$dir/certs/ca.crt"
config_from_release
webhooks 2 || exit 1
"$GQ" certs inject --ca "$dir/kcerts/ca.crt" --kubeconfig "$KUBECONFIG" >/dev/null
controller_start 0
check_match "kustomize install: GPU pods are admitted" "created \(server dry run\)" "$(gpu_admission)"
serial2=$(serving_serial)
prober_start
kubectl kustomize "$ROOT/test/e2e/overlay" | kubectl label -f - --overwrite app.kubernetes.io/managed-by=Helm >/dev/null
kubectl kustomize "$ROOT/test/e2e/overlay" | kubectl annotate -f - --overwrite \
    meta.helm.sh/release-name="$REL" meta.helm.sh/release-namespace="$NS_SYS" >/dev/null
render
run_hooks "$dir/rendered.yaml" pre-install || exit 1
check "taking over: the pre-install hook injected the new CA beside the one trusted before" 2 \
    "$(ca_bundle validatingwebhookconfiguration | base64 -d | grep -c 'BEGIN CERTIFICATE')"
kubelet_sync
helm_op install "$REL" "$CHART" -n "$NS_SYS" || { cat "$dir/helm.log"; exit 1; }
run_hooks "$dir/rendered.yaml" post-install || exit 1
eventually 30 serial_is_not "$serial2"
prober_stop "taking over a kustomize install"
check "taking over: the webhook serves the chart's certificate" changed \
    "$([[ -n $serial2 && $(serving_serial) != "$serial2" ]] && echo changed)"
check "taking over: the release owns deploy/'s objects" Helm \
    "$(kubectl -n "$NS_SYS" get configmap gpuquota-config -o jsonpath='{.metadata.labels.app\.kubernetes\.io/managed-by}')"
admits_and_enforces "taken over" helm-d
helm uninstall "$REL" -n "$NS_SYS" --no-hooks >>"$dir/helm.log" 2>&1 || { cat "$dir/helm.log"; exit 1; }
run_hooks "$dir/rendered.yaml" post-delete || exit 1
check "taken over, uninstalled: no webhook configuration is left" "" \
    "$(kubectl get mutatingwebhookconfigurations,validatingwebhookconfigurations -o name | grep gpuquota)"
stop_checked
finish
