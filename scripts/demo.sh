#!/usr/bin/env bash
# The main job: show what gpuquota does with the example pods.
set -euo pipefail
build=${1:-build}
gq="$build/gpuquota"
root=$(cd "$(dirname "$0")/.." && pwd)
echo "== gpuquota: effective default configuration"
"$gq" config default
echo
for pod in "$root"/deploy/examples/pods/*.yaml; do
    echo "== gpuquota admit deploy/examples/pods/$(basename "$pod")"
    status=0
    "$gq" admit "$pod" || status=$?
    case $status in
    0) echo "(exit 0: allowed)" ;;
    1) echo "(exit 1: denied)" ;;
    *) echo "(exit $status: bad input)" ;;
    esac
    echo
done

# Quota: the same admission against a cluster described in a state file
# (a 64Gi GPUQuota with two 24Gi trainers already running).
state="$root/deploy/examples/state"
for pod in train-16gi train-24gi; do
    echo "== gpuquota admit --state deploy/examples/state/cluster.yaml deploy/examples/state/$pod.yaml"
    status=0
    "$gq" admit --state "$state/cluster.yaml" "$state/$pod.yaml" || status=$?
    case $status in
    0) echo "(exit 0: allowed, reservation charged)" ;;
    1) echo "(exit 1: denied)" ;;
    *) echo "(exit $status: bad input)" ;;
    esac
    echo
done
