#!/usr/bin/env bash
# The chart's copies of the kustomize tree: deploy/ is the one place the
# manifests are edited; the chart carries them byte for byte (crds/ for the
# CRDs, files/ for the rest, which its templates read and adjust to the
# values). Run it after changing anything that deploy/kustomization.yaml
# lists; `sync.sh --check` (run by the helm_chart test) fails while a copy differs.
#
# Usage: deploy/helm/sync.sh [--check]
set -euo pipefail
deploy=$(cd "$(dirname "$0")/.." && pwd)
chart=$deploy/helm/gpuquota
check=${1:-}

# The resources kustomize installs, in its order. namespace.yaml stays out:
# a release lives in the namespace `helm install -n NS --create-namespace` makes.
mapfile -t resources < <(sed -n 's/^  - \(.*\.yaml\)$/\1/p' "$deploy/kustomization.yaml")
want=()
for r in "${resources[@]}"; do
    case $r in
    namespace.yaml) continue ;;
    crds/*) want+=("$r:crds/${r#crds/}") ;;
    *) want+=("$r:files/$r") ;;
    esac
done

stale=0
listed=" "
for w in "${want[@]}"; do
    src=$deploy/${w%%:*} dst=$chart/${w#*:}
    listed+="${w#*:} "
    if ! cmp -s "$src" "$dst"; then
        if [[ $check == --check ]]; then
            echo "sync: deploy/helm/gpuquota/${w#*:} differs from deploy/${w%%:*}" >&2
            stale=1
        else
            cp "$src" "$dst"
        fi
    fi
done
# Copies of files kustomize no longer lists.
for f in "$chart"/crds/*.yaml "$chart"/files/*.yaml; do
    [[ -e $f ]] || continue
    rel=${f#"$chart"/}
    [[ $listed == *" $rel "* ]] && continue
    if [[ $check == --check ]]; then
        echo "sync: deploy/helm/gpuquota/$rel is not in deploy/kustomization.yaml" >&2
        stale=1
    else
        rm -f "$f"
    fi
done
if ((stale)); then
    echo "sync: run deploy/helm/sync.sh" >&2
    exit 1
fi
