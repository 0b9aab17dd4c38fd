# Sourced by the benchmarks that drive a real control plane
# (scripts/bench-pods.sh, scripts/bench-queue.sh, scripts/bench-kueue.sh):
#   bench_out NAME BUILD_DIR
# sets ROOT (the source tree) and GQ (BUILD_DIR's gpuquota), puts Go on PATH when it is installed but not there (the control plane is
# built from Go modules), and sets out to the folder the results go to,
# made if need be: $GQ_BENCH_OUT, kept (keep_out=1), or a new temporary
# gq-NAME.XXXXXX, which the caller removes when it is done (keep_out=0).
bench_out() {
    local build=${2:?usage: $1.sh BUILD_DIR}
    ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    GQ=$(cd "$build" && pwd)/gpuquota
    if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
        export PATH=/usr/local/go/bin:$PATH
    fi
    out=${GQ_BENCH_OUT:-}
    keep_out=1
    if [[ -z $out ]]; then
        out=$(mktemp -d "/tmp/gq-$1.XXXXXX")
        keep_out=0
    fi
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
}

# bench_cluster_up: test/bench/podcreate built into $out/podcreate (path in
# podcreate), the control plane of test/e2e/suite.sh up in $out/e2e with
# gpuquota installed (its log in $out/up.log), test/e2e/lib.sh sourced;
# brought down, and $out removed unless kept, when the shell exits.
bench_cluster_up() {
    export GQ_E2E_DIR=$out/e2e GQ ROOT
    podcreate=$out/podcreate
    trap bench_cluster_down EXIT
    (cd "$ROOT/test/bench/podcreate" && GOFLAGS=-mod=readonly go build -o "$podcreate" .)
    "$ROOT/test/e2e/suite.sh" up "$GQ_E2E_DIR" "$GQ" >"$out/up.log" 2>&1
    set +e
    # shellcheck source=../test/e2e/lib.sh
    source "$ROOT/test/e2e/lib.sh"
    set -e
}
bench_cluster_down() {
    "$ROOT/test/e2e/suite.sh" down "$GQ_E2E_DIR" >/dev/null 2>&1 || true
    ((keep_out)) || rm -rf "$out"
}

# After bench_cluster_up:
# api_reqs FILE: kube-apiserver's request counters now (podcreate metrics).
api_reqs() { "$podcreate" metrics --kubeconfig "$KUBECONFIG" >"$1" 2>/dev/null || echo '{}' >"$1"; }
# reqs_per_pod LABEL N FILE0 FILE1: the requests between two api_reqs, per pod.
reqs_per_pod() {
    python3 - "$@" <<'PY'
import json, sys
label, n, a, b = sys.argv[1], int(sys.argv[2]), json.load(open(sys.argv[3])), json.load(open(sys.argv[4]))
d = {k[4:]: (b[k] - a.get(k, 0)) / max(n, 1) for k in b if k.startswith("req ")}
rows = sorted(((v, k) for k, v in d.items() if v >= 0.05), reverse=True)
print("%s, kube-apiserver requests per pod: %.2f in all; %s" % (label, sum(d.values()),
      ", ".join("%s %.2f" % (k, v) for v, k in rows)))
PY
}
