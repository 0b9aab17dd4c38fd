# Sourced by the benchmarks that drive a real control plane
# (scripts/bench-pods.sh, scripts/bench-queue.sh):
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
