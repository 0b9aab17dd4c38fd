#!/usr/bin/env bash
# The Helm chart without a cluster: its copies of deploy/ are current
# (deploy/helm/sync.sh --check), `helm lint --strict` passes with the default
# values and every example, every example renders and its configuration
# passes `gpuquota config check`, and `helm template` with the default values
# renders exactly what `kubectl kustomize deploy/` does (test/helm/compare.py)
# — which a changed copy in the chart is shown to break.
#
# Usage: chart.sh GPUQUOTA
set -uo pipefail
gq=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
chart=$root/deploy/helm/gpuquota
bin=$("$root/scripts/k8s-bin.sh" --quiet) || exit 1
export PATH=$bin:$PATH
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failures=0
pass() { echo "ok   - $*"; }
fail() { echo "FAIL - $*"; failures=$((failures + 1)); }
run() { # run NAME CMD...: pass when CMD succeeds, else show its output
    local name=$1 log
    shift
    if log=$("$@" 2>&1); then pass "$name"; else fail "$name"; echo "$log" | tail -20; fi
}
config_of() { # the configuration file in rendered manifests
    python3 -c '
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "ConfigMap" and d["metadata"]["name"] == "gpuquota-config":
        sys.stdout.write(d["data"]["config.yaml"])' "$1"
}

run "the chart's copies of deploy/ are current" "$root/deploy/helm/sync.sh" --check
run "helm lint --strict (default values)" helm lint --strict "$chart"
for ex in "$chart"/examples/*.yaml; do
    name=$(basename "$ex")
    run "helm lint --strict -f examples/$name" helm lint --strict "$chart" -f "$ex"
    if helm template gpuquota "$chart" -n gpuquota-system -f "$ex" >"$out/$name" 2>"$out/err"; then
        pass "helm template -f examples/$name"
        config_of "$out/$name" >"$out/config-$name"
        run "examples/$name: its configuration passes gpuquota config check" "$gq" config check "$out/config-$name"
    else
        fail "helm template -f examples/$name"
        cat "$out/err"
    fi
done
if msg=$(helm template gpuquota "$chart" --set certificates.mode=vault 2>&1); then
    fail "an unknown certificates.mode is refused"
elif [[ $msg == *'certificates.mode must be self-managed, cert-manager or manual, not "vault"'* ]]; then
    pass "an unknown certificates.mode is refused"
else
    fail "an unknown certificates.mode is refused: $msg"
fi
if msg=$(helm template gpuquota "$chart" --set certificates.selfManaged.renewBeforeDays=365 2>&1); then
    fail "renewBeforeDays not below days is refused"
elif [[ $msg == *"renewBeforeDays (365) must be less than days (365)"* ]]; then
    pass "renewBeforeDays not below days is refused"
else
    fail "renewBeforeDays not below days is refused: $msg"
fi
# The knobs managed clusters need (docs/install.md), as rendered.
field() { # field FILE KIND NAME PY-EXPR: the expression over the object, printed
    python3 -c '
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == sys.argv[2] and d["metadata"]["name"] == sys.argv[3]:
        o = d
        print(eval(sys.argv[4]))' "$@"
}
expect() { # expect NAME WANT GOT
    if [[ $2 == "$3" ]]; then pass "$1"; else fail "$1: want $2, got $3"; fi
}
w=$out/gke-private.yaml
c='o["spec"]["template"]["spec"]["containers"][0]'
expect "webhook.port: the container listens on it" "True" \
    "$(field "$w" Deployment gpuquota-webhook "'--listen=:10250' in $c['args']")"
expect "webhook.port: the container port (and so the probes and the Service's targetPort)" 10250 \
    "$(field "$w" Deployment gpuquota-webhook "$c['ports'][0]['containerPort']")"
expect "webhook.port: the Service still answers on 443, to the named port" "443 https" \
    "$(field "$w" Service gpuquota-webhook "'%d %s' % (o['spec']['ports'][0]['port'], o['spec']['ports'][0]['targetPort'])")"
expect "webhook.port: the NetworkPolicy opens it" 10250 \
    "$(field "$w" NetworkPolicy gpuquota-webhook "o['spec']['ingress'][0]['ports'][0]['port']")"
expect "webhook.priorityQuota: the ResourceQuota covering system-cluster-critical" \
    "['system-cluster-critical']" \
    "$(field "$w" ResourceQuota gpuquota-critical-pods "o['spec']['scopeSelector']['matchExpressions'][0]['values']")"
w=$out/eks-host-network.yaml
expect "webhook.hostNetwork: on the node's network, with cluster DNS" "True ClusterFirstWithHostNet 10260" \
    "$(field "$w" Deployment gpuquota-webhook "'%s %s %d' % (o['spec']['template']['spec']['hostNetwork'], o['spec']['template']['spec']['dnsPolicy'], $c['ports'][0]['containerPort'])")"
helm template gpuquota "$chart" -n gpuquota-system --set webhook.priorityQuota.enabled=false \
    --set 'webhookFailurePolicy.validate-claims\.gpuquota\.io=Ignore' >"$out/knobs.yaml"
expect "webhook.priorityQuota.enabled=false leaves the ResourceQuota out" "" \
    "$(field "$out/knobs.yaml" ResourceQuota gpuquota-critical-pods "1")"
expect "webhookFailurePolicy sets one webhook's, and only its" "Fail Fail Ignore Fail" \
    "$(field "$out/knobs.yaml" ValidatingWebhookConfiguration gpuquota "' '.join(x['failurePolicy'] for x in o['webhooks'])") $(field "$out/knobs.yaml" MutatingWebhookConfiguration gpuquota "o['webhooks'][0]['failurePolicy']")" 
# The controller's own updates skip the validating webhooks: its account is
# named in the release's namespace, never in deploy/'s.
helm template gpuquota "$chart" -n gq-elsewhere >"$out/elsewhere.yaml"
expect "the controller's updates skip the webhooks under its account in the release namespace" \
    "2 0" "$(field "$out/elsewhere.yaml" ValidatingWebhookConfiguration gpuquota "'%d %d' % (sum(\"'system:serviceaccount:gq-elsewhere:gpuquota-controller'\" in m['expression'] for x in o['webhooks'] for m in x.get('matchConditions', [])), sum('gpuquota-system' in m['expression'] for x in o['webhooks'] for m in x.get('matchConditions', [])))")"
# The versions claimed are the versions tested (docs/install.md): 1.34 or later.
if msg=$(helm template gpuquota "$chart" --kube-version 1.33.0 2>&1); then
    fail "a cluster older than 1.34 is refused"
elif [[ $msg == *'chart requires kubeVersion: >=1.34.0-0 which is incompatible with Kubernetes v1.33.0'* ]]; then
    pass "a cluster older than 1.34 is refused"
else
    fail "a cluster older than 1.34 is refused: $msg"
fi
run "helm template --kube-version 1.34.4 (the version tested)" \
    helm template gpuquota "$chart" --kube-version 1.34.4
if msg=$(helm template gpuquota "$chart" --set 'webhookFailurePolicy.mutate\.gpuquota\.io=Sometimes' 2>&1); then
    fail "a failurePolicy other than Fail or Ignore is refused"
elif [[ $msg == *'webhookFailurePolicy.mutate.gpuquota.io must be Fail or Ignore, not "Sometimes"'* ]]; then
    pass "a failurePolicy other than Fail or Ignore is refused"
else
    fail "a failurePolicy other than Fail or Ignore is refused: $msg"
fi
kubectl kustomize "$root/deploy" >"$out/kustomize.yaml"
helm template gpuquota "$chart" -n gpuquota-system --include-crds >"$out/helm.yaml"
run "helm template (defaults) renders what kubectl kustomize deploy/ does" \
    python3 "$root/test/helm/compare.py" "$out/kustomize.yaml" "$out/helm.yaml"

# The comparison sees drift: a chart whose copy of webhook.yaml differs.
cp -r "$chart" "$out/drifted"
sed -i 's/timeoutSeconds: 10/timeoutSeconds: 11/' "$out/drifted/files/webhooks.yaml"
helm template gpuquota "$out/drifted" -n gpuquota-system --include-crds >"$out/drifted.yaml"
if python3 "$root/test/helm/compare.py" "$out/kustomize.yaml" "$out/drifted.yaml" >"$out/drift.txt"; then
    fail "a drifted chart is reported"
else
    grep -q 'drift: MutatingWebhookConfiguration /gpuquota differs' "$out/drift.txt" &&
        grep -q '+  timeoutSeconds: 11' "$out/drift.txt" && pass "a drifted chart is reported" ||
        { fail "a drifted chart is reported"; cat "$out/drift.txt"; }
fi
if ((failures)); then
    echo "$failures check(s) failed"
    exit 1
fi
echo "helm chart: ok"
