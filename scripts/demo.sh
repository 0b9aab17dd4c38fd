#!/usr/bin/env bash
# The main job: show what gpuquota does with the example pods.
set -euo pipefail
build=${1:-build}
gq="$build/gpuquota"
echo "== gpuquota: effective default configuration"
"$gq" config default
