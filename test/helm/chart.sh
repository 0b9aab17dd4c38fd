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
