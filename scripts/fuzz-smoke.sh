#!/usr/bin/env bash
# Build every libFuzzer target with clang (ASan + UBSan, coverage feedback)
# in FUZZ_DIR and run each for SECONDS from its seed corpus, so that a new
# parser bug fails `make test` rather than waiting for someone to fuzz by
# hand. The seed corpora under test/fuzz/corpus are read only: what a run
# finds new goes to a scratch folder, removed after. A crash, a leak or a
# sanitizer report fails the run and leaves the crashing input in FUZZ_DIR.
#
#   scripts/fuzz-smoke.sh FUZZ_DIR [SECONDS]      (make fuzz-smoke; default 5 s)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: fuzz-smoke.sh FUZZ_DIR [SECONDS]}
secs=${2:-5}
if [[ ! -f $dir/CMakeCache.txt ]]; then
    CC=clang cmake -S "$ROOT" -B "$dir" -DGQ_FUZZ=ON -DGQ_SANITIZE=ON -DGQ_E2E=OFF -DGQ_BENCH=OFF >/dev/null
fi
mapfile -t targets < <(find "$ROOT/test/fuzz/corpus" -mindepth 1 -maxdepth 1 -type d -printf 'fuzz_%f\n' | sort)
cmake --build "$dir" -j "$(nproc 2>/dev/null || echo 2)" --target "${targets[@]}" -- --no-print-directory >/dev/null
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=0
for t in "${targets[@]}"; do
    name=${t#fuzz_}
    mkdir -p "$scratch/$name"
    if (cd "$dir" && ASAN_OPTIONS=detect_leaks=1 "./test/$t" -max_total_time="$secs" -timeout=10 \
        -rss_limit_mb=1024 -print_final_stats=1 "$scratch/$name" "$ROOT/test/fuzz/corpus/$name" \
        >"$scratch/$name.log" 2>&1); then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/$name.log")
        echo "fuzz $name: ${runs:-?} runs in ${secs} s, no crash"
    else
        echo "FAIL - fuzz $name:"
        grep -E -A20 'ERROR|==[0-9]+==|Test unit written' "$scratch/$name.log" | head -40
        failed=$((failed + 1))
    fi
done
((failed == 0)) || { echo "$failed fuzz target(s) failed"; exit 1; }
