#!/usr/bin/env bash
# Bring the e2e environment up or down: the real control plane, then gpuquota
# installed the way docs/install.md tells a user to install it.
#
#   suite.sh up DIR GPUQUOTA     control plane + gpuquota (3 webhook replicas, 2 controllers)
#   suite.sh down DIR            stop everything, remove DIR
#
# The webhook and the controller run as local processes with their service
# accounts' tokens (their Deployments are left out by test/e2e/overlay: kwok
# would only pretend to run their containers), so RBAC is exactly
# deploy/rbac.yaml's.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cmd=${1:?usage: suite.sh up|down DIR [GPUQUOTA]}
dir=${2:?usage: suite.sh up|down DIR [GPUQUOTA]}
# shellcheck source=../../scripts/stop-pidfile.sh
source "$ROOT/scripts/stop-pidfile.sh"

# down: stop every process (SIGTERM, 20 s to drain and exit, so the
# sanitizers' exit-time checks run), then the cluster; fails when a log of
# theirs holds a sanitizer report (test/sanitizer_reports.sh).
down() {
    local f pid rc=0
    for f in "$dir"/webhook-*.pid "$dir"/controller-*.pid "$dir"/aux-*.pid; do
        [[ -f $f ]] || continue
        kill -TERM "$(cat "$f")" 2>/dev/null || true
    done
    for f in "$dir"/webhook-*.pid "$dir"/controller-*.pid "$dir"/aux-*.pid; do
        [[ -f $f ]] || continue
        pid=$(cat "$f")
        for _ in $(seq 200); do pid_alive "$pid" || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    "$ROOT/test/sanitizer_reports.sh" "$dir"/webhook-*.log "$dir"/controller-*.log || rc=1
    "$ROOT/scripts/local-cluster.sh" down "$dir/cluster"
    # shellcheck source=../../scripts/ports.sh
    source "$ROOT/scripts/ports.sh"
    release_ports "$dir"
    rm -rf "$dir"
    return "$rc"
}

case $cmd in
down)
    down
    exit $?
    ;;
up) ;;
*)
    echo "usage: suite.sh up|down DIR [GPUQUOTA]" >&2
    exit 2
    ;;
esac

GQ=$(cd "$(dirname "${3:?the gpuquota binary}")" && pwd)/$(basename "$3")
[[ ! -e $dir ]] || down || true
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
trap 'rc=$?; if ((rc)); then echo "e2e setup failed; logs:" >&2; tail -n 20 "$dir"/*.log >&2 2>/dev/null; down || true; fi' EXIT
"$ROOT/scripts/local-cluster.sh" up "$dir/cluster" >/dev/null
export GQ_E2E_DIR=$dir GQ ROOT
# shellcheck source=lib.sh
source "$ROOT/test/e2e/lib.sh"
set -e

# docs/install.md, step by step.
"$GQ" certs generate --service gpuquota-webhook --namespace "$NS_SYS" --out "$dir/certs" >/dev/null
kubectl apply -k "$ROOT/test/e2e/overlay" >/dev/null
kubectl -n "$NS_SYS" create secret tls gpuquota-webhook-tls \
    --cert "$dir/certs/tls.crt" --key "$dir/certs/tls.key" >/dev/null
# The configuration the Deployments would mount.
kubectl -n "$NS_SYS" get configmap gpuquota-config -o jsonpath='{.data.config\.yaml}' |
    sed '/^audit:/,/^[^ ]/{/^audit:/d;/^  /d}' >"$dir/config.yaml"
printf 'audit:\n  path: %s/audit.log\n' "$dir" >>"$dir/config.yaml"
cp "$dir/config.yaml" "$dir/config.default.yaml"
webhooks 3
"$GQ" certs inject --ca "$dir/certs/ca.crt" --kubeconfig "$KUBECONFIG" >/dev/null
controller_start 0
controller_start 1
echo "$dir"
